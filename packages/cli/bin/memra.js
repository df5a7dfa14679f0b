#!/usr/bin/env bun
// The `memra` command. Runs the built CLI when present (published package), else the sources
// (workspace checkout, where `bunx memra` works straight after `bun install`).
import { existsSync } from "node:fs";

const built = new URL("../dist/main.js", import.meta.url);
await import(existsSync(built) ? built.href : new URL("../src/main.ts", import.meta.url).href);
