import { packageBuildConfig } from "../../tsup.base";

export default packageBuildConfig({
  entry: ["src/index.ts", "src/main.ts"],
  dts: { entry: "src/index.ts" },
  // Workspace-only (private, dev): loaded at run time when present for the demo model, never bundled.
  external: ["@memra/synthetic"],
});
