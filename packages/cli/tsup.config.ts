import { packageBuildConfig } from "../../tsup.base";

export default packageBuildConfig({
  entry: ["src/index.ts", "src/main.ts"],
  dts: { entry: "src/index.ts" },
});
