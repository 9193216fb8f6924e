/* The few C library and CUDA driver-header names the peers' device headers use, for NVRTC
 * (which ships no C library headers): integer types and limits from CCCL's <cuda/std/...>
 * (which NVRTC compiles), the Linux big-endian type names, errno values, CUDA_VERSION.
 * Written for this project; no peer code. */
#pragma once
#include <cuda/std/cstdint>
#include <cuda/std/climits>
#include <cuda/std/cstddef>
#include <cuda/std/type_traits>
/* Their volatile-access macros use TYPEOF, decltype without __GNUC__ (NVRTC): a reference
 * type for *p. The same access on the referenced type. */
#define ACCESS_ONCE(x) (*(volatile ::cuda::std::remove_reference_t<decltype(x)>*)&(x))
typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef unsigned short __be16;
typedef unsigned int __be32;
typedef unsigned long long __be64;
#ifndef NULL
#define NULL 0
#endif
#define EINVAL 22
#define EBUSY 16
#define EFAULT 14
#define EIO 5
#define EAGAIN 11
#define ENOMEM 12
#define ETIMEDOUT 110
/* CUDA 13.0, the toolkit of the pinned wheels and of the GPU machine. */
#ifndef CUDA_VERSION
#define CUDA_VERSION 13000
#endif
