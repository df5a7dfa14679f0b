export { CliError } from "./cli-error";
export { type CliIO, processIO } from "./cli-io";
export { runCli, usage } from "./run-cli";
export { renderInspection } from "./commands/inspect";
