import sys, torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
B, H, N, D, causal = (int(x) for x in sys.argv[1:6])
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
do = torch.randn(B, H, N, D, device="cuda", dtype=torch.float16)
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    for _ in range(6):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)); o.backward(do)
torch.cuda.synchronize()
