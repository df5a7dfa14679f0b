import { GrammarAutomaton } from "../grammar-automaton";
import { parseGbnf } from "../parse-gbnf";

/** Whether the grammar matches the whole text, walking code points through the automaton. */
export function grammarMatches(gbnf: string, text: string): boolean {
  const automaton = new GrammarAutomaton(parseGbnf(gbnf));
  let state = automaton.initialState;
  for (const character of text) {
    state = automaton.step(state, character.codePointAt(0)!);
    if (state < 0) return false;
  }
  return automaton.isAccepting(state);
}
