/** The second half of the CUDA golden conformance suite (see golden-suite.test.ts). */
import { defineCudaGoldenSuite } from "./golden-suite-definition";

defineCudaGoldenSuite(1);
