// The public surface of @memra/cpu-ffi arrives with its issue (see README: packages).
export {};
