#pragma once
/// Process-wide tuning of the host allocator for training loops.

namespace troupe::compute {

/// Makes glibc keep freed large blocks instead of returning them to the kernel. LibTorch
/// allocates activations of every micro-batch afresh; with glibc's defaults each block above
/// 128 KiB is a new mmap whose pages are zero-filled by page faults on first touch (17% of a
/// bert-mini training step was kernel time in clear_page/page-fault handling). Call once, from
/// main, before training.
void keep_freed_memory_mapped();

}  // namespace troupe::compute
