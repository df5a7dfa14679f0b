import type { Grammar } from "./grammar";
import { GrammarError } from "./grammar-error";

/** Which rules can match the empty string (a fixed point: a rule is nullable when one alternative is all nullable rules). */
export function nullableRules(grammar: Grammar): boolean[] {
  const nullable = grammar.rules.map(() => false);
  let changed = true;
  while (changed) {
    changed = false;
    grammar.rules.forEach((alternatives, rule) => {
      if (nullable[rule]) return;
      if (alternatives.some((sequence) => sequence.every((symbol) => symbol.type === "rule" && nullable[symbol.rule]))) {
        nullable[rule] = true;
        changed = true;
      }
    });
  }
  return nullable;
}

/**
 * Rejects what the stack-based matcher cannot run: a reference to a rule without alternatives
 * (never defined) and left recursion (a rule that can reach itself without consuming a character,
 * through nullable prefixes too, such as `x ::= y* x` or `(a?)*`), which would expand forever.
 * The error names the cycle.
 */
export function validateGrammar(grammar: Grammar): void {
  const { rules, ruleNames } = grammar;
  rules.forEach((alternatives, rule) => {
    if (!alternatives) throw new GrammarError(`rule "${ruleNames[rule]}" is referenced but never defined`, ruleNames[rule]);
    for (const sequence of alternatives) {
      for (const symbol of sequence) {
        if (symbol.type === "rule" && (symbol.rule < 0 || symbol.rule >= rules.length)) throw new GrammarError(`rule "${ruleNames[rule]}" refers to rule ${symbol.rule}, which does not exist`, ruleNames[rule]);
      }
    }
  });
  const nullable = nullableRules(grammar);
  // Edges rule → rules it can start with (after nullable symbols only).
  const leftEdges = rules.map((alternatives) => {
    const edges = new Set<number>();
    for (const sequence of alternatives) {
      for (const symbol of sequence) {
        if (symbol.type === "characters") break;
        edges.add(symbol.rule);
        if (!nullable[symbol.rule]) break;
      }
    }
    return [...edges];
  });
  // Iterative depth-first search for a cycle; 0 = unseen, 1 = on the path, 2 = done.
  const state = new Uint8Array(rules.length);
  for (let start = 0; start < rules.length; start++) {
    if (state[start] !== 0) continue;
    const path: number[] = [start];
    const nextEdge: number[] = [0];
    state[start] = 1;
    while (path.length > 0) {
      const rule = path[path.length - 1]!;
      const edges = leftEdges[rule]!;
      const index = nextEdge[nextEdge.length - 1]!;
      if (index >= edges.length) {
        state[rule] = 2;
        path.pop();
        nextEdge.pop();
        continue;
      }
      nextEdge[nextEdge.length - 1] = index + 1;
      const target = edges[index]!;
      if (state[target] === 1) {
        const cycle = [...path.slice(path.indexOf(target)), target].map((r) => ruleNames[r]);
        throw new GrammarError(`left recursion: ${cycle.join(" -> ")} can expand forever without matching a character`, ruleNames[target]);
      }
      if (state[target] === 0) {
        state[target] = 1;
        path.push(target);
        nextEdge.push(0);
      }
    }
  }
}
