// The public surface of @memra/sampler arrives with its issue (see README: packages).
export {};
