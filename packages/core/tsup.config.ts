import { packageBuildConfig } from "../../tsup.base";

export default packageBuildConfig();
