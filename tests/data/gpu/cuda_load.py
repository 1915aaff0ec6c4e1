#!/usr/bin/env python3
"""A CUDA workload of known shape through the driver API alone (libcuda.so.1, no toolkit):
`cuda_load.py busy|idle SECONDS GIB` holds GIB of GPU memory for SECONDS, with a spinning
kernel on the GPU all the while (busy) or none (idle). Used by scripts/gpu-check.sh."""
import ctypes
import sys
import time

PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry spin(.param .u64 cycles)
{
  .reg .u64 %rd<5>;
  .reg .pred %p;
  ld.param.u64 %rd1, [cycles];
  mov.u64 %rd2, %clock64;
LOOP:
  mov.u64 %rd3, %clock64;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p, %rd4, %rd1;
  @%p bra LOOP;
  ret;
}
"""


def main():
    mode, seconds, gib = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(rc, what):
        if rc != 0:
            sys.exit(f"{what}: CUDA error {rc}")

    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    nbytes = int(gib * (1 << 30))
    mem = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(mem), ctypes.c_size_t(nbytes)), "cuMemAlloc")
    check(cuda.cuMemsetD8_v2(mem, ctypes.c_ubyte(0), ctypes.c_size_t(nbytes)), "cuMemset")
    end = time.time() + seconds
    if mode == "idle":
        time.sleep(max(0.0, end - time.time()))
        return
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), PTX), "cuModuleLoadData")
    check(cuda.cuModuleGetFunction(ctypes.byref(fn), module, b"spin"), "cuModuleGetFunction")
    cycles = ctypes.c_uint64(200_000_000)
    args = (ctypes.c_void_p * 1)(ctypes.addressof(cycles))
    while time.time() < end:
        check(cuda.cuLaunchKernel(fn, 256, 1, 1, 128, 1, 1, 0, None, args, None), "cuLaunchKernel")
        check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")


if __name__ == "__main__":
    main()
