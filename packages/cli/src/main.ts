#!/usr/bin/env bun
import { processIO } from "./cli-io";
import { runCli } from "./run-cli";

process.exitCode = await runCli(process.argv.slice(2), processIO);
