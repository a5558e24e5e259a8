/* layout.h: --layout-csv, the tensor cores' fragment layout as data for plots/mma_layout.py (layout.c). */
#ifndef LAYOUT_H
#define LAYOUT_H

/* Every element of mma.sync.m16n8k16's A, B and C with the lane and register that hold it, to path as CSV; exit code
 * (a path that cannot be written: a usage error, exit 2). */
int layout_write(const char *path);

#endif
