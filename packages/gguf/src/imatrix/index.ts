export { IMATRIX_COUNTS_SUFFIX, IMATRIX_GENERAL_TYPE, IMATRIX_KEYS, IMATRIX_SUMS_SUFFIX, type Imatrix, type ImatrixEntry, imatrixNameOrder } from "./imatrix";
export { ImatrixError } from "./imatrix-error";
export { parseImatrix, readImatrix } from "./read-imatrix";
export { encodeImatrix, writeImatrix } from "./write-imatrix";
export { importanceOf } from "./importance-of";
export { type ImatrixSource, combineImatrices } from "./combine-imatrices";
export { encodeLegacyImatrix, writeLegacyImatrix } from "./write-legacy-imatrix";
export { type ImatrixLayerStatistics, type ImatrixStatistics, type ImatrixTensorStatistics, imatrixStatistics } from "./imatrix-statistics";
export { checkImatrixModel } from "./check-imatrix-model";
