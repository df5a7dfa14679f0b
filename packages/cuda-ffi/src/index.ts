// The public surface of @memra/cuda-ffi arrives with its issue (see README: packages).
export {};
