/**
 * The scale searches behind ggml's reference k-quant quantizers, written to repeat ggml's binary32
 * arithmetic exactly: every C float operation is one Math.fround here (`f`), in the same order, with
 * no fused multiply-add (ggml-base is compiled without FMA contraction on x86-64), and accumulations
 * run sequentially. Integers converted to float in C are exact here too. Inputs must be f32 values.
 *
 * Naming: `searchSymmetricScale` is ggml's `make_qx_quants`, `searchSymmetricScaleQ3` is
 * `make_q3_quants`, `searchScaleAndMin` is `make_qkx2_quants` (and `make_qkx3_quants` given weights:
 * the two differ only where no weights are passed), `searchPositiveScale` is `make_qp_quants`.
 */

const f = Math.fround;

/** ggml's GROUP_MAX_EPS: a group whose largest magnitude is below this is treated as all zero. */
export const GROUP_MAX_EPS = f(1e-15);

const scratchFloat = new Float32Array(1);
const scratchInt = new Int32Array(scratchFloat.buffer);

/**
 * ggml's `nearest_int`: adds 1.5 * 2^23 in binary32 and reads the low mantissa bits, which is
 * round-half-to-even for |value| < 2^22 and reproduces ggml's wrapped result beyond that.
 */
export function nearestInt(value: number): number {
  if (value > -4194304 && value < 4194304) return f(value + 12582912) - 12582912;
  scratchFloat[0] = value + 12582912;
  return (scratchInt[0]! & 0x7fffff) - 0x400000;
}

const ONE_TENTH = f(0.1);

/**
 * ggml's `make_qx_quants` with rmse_type 1: finds a scale so that x ≈ scale * (L - nmax) with L in
 * [0, 2*nmax - 1], trying 19 candidate inverse scales around -nmax / max, each judged by the fit
 * weighted with `weights[weightOffset..]` (ggml's quant_weights), or with x^2 when there are none.
 * Writes L to `levels[levelOffset..]` and returns the scale (0 for an all-zero group).
 */
export function searchSymmetricScale(
  n: number,
  nmax: number,
  x: Float32Array,
  xOffset: number,
  levels: Uint8Array,
  levelOffset: number,
  weights?: Float32Array,
  weightOffset = 0,
): number {
  let max = 0;
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const value = x[xOffset + i]!;
    const ax = Math.abs(value);
    if (ax > amax) {
      amax = ax;
      max = value;
    }
  }
  if (amax < GROUP_MAX_EPS) {
    levels.fill(0, levelOffset, levelOffset + n);
    return 0;
  }
  let iscale = f(-nmax / max);
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const value = x[xOffset + i]!;
    let l = nearestInt(f(iscale * value));
    l = Math.max(-nmax, Math.min(nmax - 1, l));
    levels[levelOffset + i] = l + nmax;
    const w = weights ? weights[weightOffset + i]! : f(value * value);
    sumlx = f(sumlx + f(f(w * value) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  let scale = suml2 !== 0 ? f(sumlx / suml2) : 0;
  let best = f(scale * sumlx);
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    iscale = f(-f(nmax + f(ONE_TENTH * is)) / max);
    sumlx = 0;
    suml2 = 0;
    for (let i = 0; i < n; i++) {
      const value = x[xOffset + i]!;
      let l = nearestInt(f(iscale * value));
      l = Math.max(-nmax, Math.min(nmax - 1, l));
      const w = weights ? weights[weightOffset + i]! : f(value * value);
      sumlx = f(sumlx + f(f(w * value) * l));
      suml2 = f(suml2 + f(f(w * l) * l));
    }
    if (suml2 > 0 && f(sumlx * sumlx) > f(best * suml2)) {
      for (let i = 0; i < n; i++) {
        const l = nearestInt(f(iscale * x[xOffset + i]!));
        levels[levelOffset + i] = nmax + Math.max(-nmax, Math.min(nmax - 1, l));
      }
      scale = f(sumlx / suml2);
      best = f(scale * sumlx);
    }
  }
  return scale;
}

/**
 * ggml's `make_q3_quants` with do_rmse: starts from -nmax / max, then moves single levels while
 * that improves the weighted (x^2) fit, for up to 5 passes. Writes L + nmax (L in [-nmax, nmax-1])
 * to `levels[levelOffset..]` and returns the scale. An all-zero group gets levels 0 and scale 0.
 * `work` must hold at least n entries.
 */
export function searchSymmetricScaleQ3(
  n: number,
  nmax: number,
  x: Float32Array,
  xOffset: number,
  levels: Uint8Array,
  levelOffset: number,
  work: Int32Array,
): number {
  let max = 0;
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const value = x[xOffset + i]!;
    const ax = Math.abs(value);
    if (ax > amax) {
      amax = ax;
      max = value;
    }
  }
  if (amax < GROUP_MAX_EPS) {
    levels.fill(0, levelOffset, levelOffset + n);
    return 0;
  }
  const iscale = f(-nmax / max);
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const value = x[xOffset + i]!;
    let l = nearestInt(f(iscale * value));
    l = Math.max(-nmax, Math.min(nmax - 1, l));
    work[i] = l;
    const w = f(value * value);
    sumlx = f(sumlx + f(f(w * value) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  for (let attempt = 0; attempt < 5; attempt++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const value = x[xOffset + i]!;
      const w = f(value * value);
      const current = work[i]!;
      let slx = f(sumlx - f(f(w * value) * current));
      if (slx > 0) {
        let sl2 = f(suml2 - f(f(w * current) * current));
        let next = nearestInt(f(f(value * sl2) / slx));
        next = Math.max(-nmax, Math.min(nmax - 1, next));
        if (next !== current) {
          slx = f(slx + f(f(w * value) * next));
          sl2 = f(sl2 + f(f(w * next) * next));
          if (sl2 > 0 && f(f(slx * slx) * suml2) > f(f(sumlx * sumlx) * sl2)) {
            work[i] = next;
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (changed === 0) break;
  }
  for (let i = 0; i < n; i++) levels[levelOffset + i] = work[i]! + nmax;
  return suml2 > 0 ? f(sumlx / suml2) : 0;
}

/**
 * ggml's `make_qkx2_quants`: fits x ≈ scale * L + min (min <= 0, L in [0, nmax]) minimising the
 * weighted squared (or, with `useMad`, absolute) error, trying nstep + 1 inverse scales
 * (rmin + rdelta * is + nmax) / (max - min) and solving the weighted least squares for each.
 * As in ggml, each later candidate is measured from the best min found so far, not the initial one.
 * Writes L to `levels[levelOffset..]`, stores -min into `mins[minIndex]` and returns the scale.
 * `weights` holds n weights from index 0; `work` must hold at least n entries.
 */
export function searchScaleAndMin(
  n: number,
  nmax: number,
  x: Float32Array,
  xOffset: number,
  weights: Float32Array,
  levels: Uint8Array,
  levelOffset: number,
  mins: Float32Array,
  minIndex: number,
  work: Uint8Array,
  rmin: number,
  rdelta: number,
  nstep: number,
  useMad: boolean,
): number {
  let min = x[xOffset]!;
  let max = min;
  let sumW = weights[0]!;
  let sumX = f(sumW * min);
  for (let i = 1; i < n; i++) {
    const value = x[xOffset + i]!;
    if (value < min) min = value;
    if (value > max) max = value;
    const w = weights[i]!;
    sumW = f(sumW + w);
    sumX = f(sumX + f(w * value));
  }
  if (min > 0) min = 0;
  if (max === min) {
    levels.fill(0, levelOffset, levelOffset + n);
    mins[minIndex] = -min;
    return 0;
  }
  let iscale = f(nmax / f(max - min));
  let scale = f(1 / iscale);
  let bestError = 0;
  for (let i = 0; i < n; i++) {
    const value = x[xOffset + i]!;
    const l = Math.max(0, Math.min(nmax, nearestInt(f(iscale * f(value - min)))));
    levels[levelOffset + i] = l;
    let diff = f(f(f(scale * l) + min) - value);
    diff = useMad ? Math.abs(diff) : f(diff * diff);
    bestError = f(bestError + f(weights[i]! * diff));
  }
  if (nstep < 1) {
    mins[minIndex] = -min;
    return scale;
  }
  for (let is = 0; is <= nstep; is++) {
    // `min` is the best fit so far (ggml updates it inside this loop), so the range moves with it.
    iscale = f(f(f(rmin + f(rdelta * is)) + nmax) / f(max - min));
    let sumL = 0;
    let sumL2 = 0;
    let sumXL = 0;
    for (let i = 0; i < n; i++) {
      const value = x[xOffset + i]!;
      const l = Math.max(0, Math.min(nmax, nearestInt(f(iscale * f(value - min)))));
      work[i] = l;
      const wl = f(weights[i]! * l);
      sumL = f(sumL + wl);
      sumL2 = f(sumL2 + f(wl * l));
      sumXL = f(sumXL + f(wl * value));
    }
    const determinant = f(f(sumW * sumL2) - f(sumL * sumL));
    if (determinant > 0) {
      let thisScale = f(f(f(sumW * sumXL) - f(sumX * sumL)) / determinant);
      let thisMin = f(f(f(sumL2 * sumX) - f(sumL * sumXL)) / determinant);
      if (thisMin > 0) {
        thisMin = 0;
        thisScale = f(sumXL / sumL2);
      }
      let error = 0;
      for (let i = 0; i < n; i++) {
        let diff = f(f(f(thisScale * work[i]!) + thisMin) - x[xOffset + i]!);
        diff = useMad ? Math.abs(diff) : f(diff * diff);
        error = f(error + f(weights[i]! * diff));
      }
      if (error < bestError) {
        for (let i = 0; i < n; i++) levels[levelOffset + i] = work[i]!;
        bestError = error;
        scale = thisScale;
        min = thisMin;
      }
    }
  }
  mins[minIndex] = -min;
  return scale;
}

/**
 * ggml's `make_qp_quants`: a scale for n non-negative values (a super-block's group scales or mins)
 * so that x ≈ scale * L with L in [0, nmax], judged by the fit weighted with `weights`: 9 candidate
 * inverse scales around nmax / max, then single levels moved while that improves the fit, for up to
 * 5 passes. Writes L to `levels[0..n)` (as ggml's uint8_t: a negative level wraps) and returns the
 * scale (0 for an all-zero group).
 */
export function searchPositiveScale(n: number, nmax: number, x: Float32Array, levels: Uint8Array, weights: Float32Array): number {
  let max = 0;
  for (let i = 0; i < n; i++) max = max > x[i]! ? max : x[i]!;
  if (max < GROUP_MAX_EPS) {
    levels.fill(0, 0, n);
    return 0;
  }
  let iscale = f(nmax / max);
  for (let i = 0; i < n; i++) levels[i] = nearestInt(f(iscale * x[i]!));
  const scale = f(1 / iscale);
  let bestError = 0;
  for (let i = 0; i < n; i++) {
    const diff = f(x[i]! - f(scale * levels[i]!));
    bestError = f(bestError + f(f(weights[i]! * diff) * diff));
  }
  for (let is = -4; is <= 4; is++) {
    if (is === 0) continue;
    const candidate = f(f(f(ONE_TENTH * is) + nmax) / max);
    const candidateScale = f(1 / candidate);
    let error = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.min(nmax, nearestInt(f(candidate * x[i]!)));
      const diff = f(x[i]! - f(candidateScale * l));
      error = f(error + f(f(weights[i]! * diff) * diff));
    }
    if (error < bestError) {
      bestError = error;
      iscale = candidate;
    }
  }
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const l = Math.min(nmax, nearestInt(f(iscale * x[i]!)));
    levels[i] = l;
    const w = weights[i]!;
    sumlx = f(sumlx + f(f(w * x[i]!) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  for (let attempt = 0; attempt < 5; attempt++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const w = weights[i]!;
      const current = levels[i]!;
      let slx = f(sumlx - f(f(w * x[i]!) * current));
      let sl2 = f(suml2 - f(f(w * current) * current));
      if (slx > 0 && sl2 > 0) {
        const next = Math.min(nmax, nearestInt(f(f(x[i]! * sl2) / slx)));
        if (next !== current) {
          slx = f(slx + f(f(w * x[i]!) * next));
          sl2 = f(sl2 + f(f(w * next) * next));
          if (f(f(slx * slx) * suml2) > f(f(sumlx * sumlx) * sl2)) {
            levels[i] = next;
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (changed === 0) break;
  }
  return suml2 > 0 ? f(sumlx / suml2) : 0;
}
