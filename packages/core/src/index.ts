// The public surface of @memra/core arrives with its issue (see README: packages).
export {};
