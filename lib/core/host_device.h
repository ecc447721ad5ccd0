// NMT_HOST_DEVICE: a function the CPU code and the CUDA kernels both call
// (the dropout hash, the activations), one definition for every backend.
#pragma once

#if defined(__CUDACC__)
#define NMT_HOST_DEVICE __host__ __device__
#else
#define NMT_HOST_DEVICE
#endif
