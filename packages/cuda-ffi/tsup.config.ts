import { packageBuildConfig } from "../../tsup.base";

// Bun's built-in module: resolved at run time by Bun, never bundled.
export default packageBuildConfig({ external: ["bun:ffi"] });
