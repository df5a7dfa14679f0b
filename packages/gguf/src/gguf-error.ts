/**
 * Raised for any malformed, truncated or unsupported GGUF input. `field` names what was being
 * read (e.g. "tensor_infos[3].offset", "kv[\"general.name\"].value") and `offset` is the byte
 * offset in the file where it starts, so a user can find the problem with a hex editor.
 */
export class GGUFError extends Error {
  override readonly name = "GGUFError";
  readonly field: string;
  readonly offset: number;

  /** `offset` is -1 for problems that are not at a place in the file (it cannot be opened). */
  constructor(field: string, offset: number, problem: string) {
    super(offset < 0 ? problem : `${field} at byte ${offset}: ${problem}`);
    this.field = field;
    this.offset = offset;
  }
}
