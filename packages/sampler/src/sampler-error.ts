/** A sampling input the sampler cannot work with (wrong logits length, every token banned, ...). */
export class SamplerError extends Error {
  override readonly name = "SamplerError";
}

/** A sampling option with a wrong value; `option` names it ("temperature", "dry.base"). */
export class InvalidSamplingOptionError extends Error {
  override readonly name = "InvalidSamplingOptionError";
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(message);
  }
}
