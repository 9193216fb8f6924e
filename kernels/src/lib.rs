//! ibgda-kernels
