// div_by_mul_test.cpp: kernel 52's division by a multiply-high (DivByMul) and its decode of a ticket (Sched::decode),
// written again for the host, against / and against tile_order.cuh's ticket_tile, also written again here.
//   g++ -O2 -o t div_by_mul_test.cpp && ./t              every check 0 wrong, exit 0
//   g++ -O2 -DPLANT -o tp div_by_mul_test.cpp && ./tp    every multiplier one less: wrong quotients and decodes, exit 1
// The output of both: div_by_mul_test.txt.
#include <cstdio>
#include <cstdint>
#include <random>
static unsigned umulhi(unsigned a, unsigned b){return (unsigned)(((unsigned long long)a*b)>>32);}
static int clz(unsigned x){return x?__builtin_clz(x):32;}
struct DivByMul{unsigned d,m,s;
 void prepare(unsigned d_){d=d_;s=32-clz(d_-1);m=(unsigned)((((1ull<<(32+s))+d_-1)/d_)-(1ull<<32));
#ifdef PLANT
  m-=1; // the plant: every multiplier one less
#endif
 }
 unsigned div(unsigned n)const{return (n+umulhi(n,m))>>s;}};
static void ticket_tile(long ticket,long BH,long row_tiles,int causal,long G,long*bh,long*tile){
 if(causal){const long h0=ticket/(G*row_tiles)*G;const long r=ticket-h0*row_tiles;const long g=BH-h0<G?BH-h0:G;*bh=h0+r%g;*tile=row_tiles-1-r/g;}
 else{*bh=ticket/row_tiles;*tile=ticket%row_tiles;}}
struct S{long BH,G;DivByMul per_group,per_head,last_heads;unsigned rt;
 void prepare(long row_tiles,int causal){rt=(unsigned)row_tiles;unsigned G_=(unsigned)G,BH_=(unsigned)BH;per_group.prepare(causal?G_*rt:rt);per_head.prepare(G_);last_heads.prepare(BH_-(BH_-1)/G_*G_);}
 void decode(unsigned ticket,int causal,long*bh,long*tile)const{
  if(causal){const unsigned G_=(unsigned)G,BH_=(unsigned)BH;const unsigned h0=per_group.div(ticket)*G_;const unsigned r=ticket-h0*rt;const bool last=BH_-h0<G_;
   const unsigned g=last?last_heads.d:G_;const unsigned q=last?last_heads.div(r):per_head.div(r);*bh=h0+(r-q*g);*tile=rt-1-q;}
  else{const unsigned q=per_group.div(ticket);*bh=q;*tile=ticket-q*rt;}}};
int main(){
 std::mt19937_64 rng(1); long bad=0, n_checked=0;
 // divisions: random and edge
 for(int i=0;i<2000000;i++){unsigned d=(unsigned)(rng()%0x7fffffffu)+1; if(i%4==0) d=(unsigned)(rng()%5000)+1; if(i%8==1) d=1u<<(rng()%31);
  DivByMul x; x.prepare(d);
  unsigned ns[6]={0,(unsigned)(rng()%0x80000000u),0x7fffffffu,d-1,d,(unsigned)((rng()%0x80000000u)/d*d)};
  for(unsigned n:ns){ if(n>0x7fffffffu) continue; n_checked++; if(x.div(n)!=n/d){bad++; if(bad<5) printf("bad n=%u d=%u got %u want %u\n",n,d,x.div(n),n/d);}}}
 // exhaustive n for small d
 for(unsigned d=1; d<=300; d++){DivByMul x; x.prepare(d); for(unsigned n=0;n<0x7fffffffu; n+= (n<1u<<24)?1:977){n_checked++; if(x.div(n)!=n/d){bad++;}}}
 printf("divisions: %ld checked, %ld wrong\n", n_checked, bad);
 // decode vs ticket_tile over shapes
 long dbad=0,dn=0;
 for(long BH=1; BH<=300; BH+=(BH<40?1:37)) for(long rt=1; rt<=130; rt+=(rt<20?1:17)) for(long G=1; G<=BH; G+=(G<10?1:7)) for(int causal=0;causal<2;causal++){
   S s; s.BH=BH; s.G=G; s.prepare(rt,causal);
   for(long t=0;t<BH*rt;t++){long a,b,c,d2; ticket_tile(t,BH,rt,causal,G,&a,&b); s.decode((unsigned)t,causal,&c,&d2); dn++; if(a!=c||b!=d2){dbad++; if(dbad<5) printf("decode bad BH=%ld rt=%ld G=%ld causal=%d t=%ld: %ld,%ld vs %ld,%ld\n",BH,rt,G,causal,t,a,b,c,d2);}}}
 printf("decodes: %ld checked, %ld wrong\n", dn, dbad);
 return (bad||dbad)?1:0;}
