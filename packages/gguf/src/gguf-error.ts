/**
 * Raised for any malformed, truncated or unsupported GGUF input. `field` names what was being
 * read (e.g. "tensor_infos[3].offset", "kv[\"general.name\"].value") and `offset` is the byte
 * offset in the file where it starts, so a user can find the problem with a hex editor.
 */
export class GGUFError extends Error {
  override readonly name = "GGUFError";
  readonly field: string;
  readonly offset: number;

  constructor(field: string, offset: number, problem: string) {
    super(`${field} at byte ${offset}: ${problem}`);
    this.field = field;
    this.offset = offset;
  }
}
