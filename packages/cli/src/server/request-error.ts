/** A request the server answers with an error status: the message names what is wrong (and `param` the field). */
export class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly type = "invalid_request_error",
  ) {
    super(message);
  }
}
