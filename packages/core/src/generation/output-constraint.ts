import {
  type AllowedTokens,
  GrammarAutomaton,
  GrammarMatcher,
  type OutputConstraint,
  type Sampler,
  TokenTrie,
  constraintFromGbnf,
  constraintFromSchema,
  type TriggeredSampler,
  createConstrainedSampler,
  createTriggeredSampler,
} from "@memra/sampler";
import type { Model } from "../load-model";
import { InvalidOptionError, type ResolvedGenerateOptions } from "./generation-options";
import type { FinishReason, GenerationResult } from "./generation-types";

/** The output did not become a value of the schema (generation stopped early, or zod refused the value). */
export class StructuredOutputError extends Error {
  override readonly name = "StructuredOutputError";
  constructor(
    message: string,
    /** The text generated. */
    readonly text: string,
    readonly finishReason: FinishReason,
    options?: { cause?: unknown; result?: GenerationResult },
  ) {
    super(message, options);
    this.result = options?.result;
  }
  /** The generation's result (text, usage, timings) without a value, when the generation got that far. */
  readonly result: GenerationResult | undefined;
}

/** What the generation loop needs from a `schema` or `grammar` option. */
export interface GenerationConstraint {
  /** The sampler with the grammar applied (it advances the grammar by every token it returns). */
  wrap(sampler: Sampler): Sampler;
  /** Nothing but end of generation can follow: generation stops here. */
  isFinished(): boolean;
  /**
   * For a lazy grammar: true while its trigger has not appeared, when the next token is the
   * wrapped sampler's alone, so that it may be picked where the logits are; the pick then goes to
   * `observe`. Absent when the grammar governs every token.
   */
  free?(): boolean;
  /** A token picked while `free()` by the wrapped sampler outside the wrapped one's `sample`. */
  observe?(token: number): void;
  /** The value of the finished text (throws StructuredOutputError when there is none). */
  parse(text: string, finishReason: FinishReason): unknown;
}

// Built once per model: the byte trie over the vocabulary (about half a second for Qwen3's).
const tries = new WeakMap<Model, TokenTrie>();
// Compiled once per schema object or grammar text, with the masks computed so far per vocabulary.
interface Compiled {
  readonly constraint: OutputConstraint<unknown>;
  readonly automaton: GrammarAutomaton;
  readonly masks: WeakMap<TokenTrie, Map<string, AllowedTokens>>;
}
const compiledSchemas = new WeakMap<object, Compiled>();
const compiledGrammars = new Map<string, Compiled>();
const GRAMMAR_CACHE_ENTRIES = 16;

/** The token trie of a model: each token's bytes as the tokenizer decodes them; control and unused tokens excluded. */
export function modelTokenTrie(model: Model): TokenTrie {
  let trie = tries.get(model);
  if (!trie) {
    const tokenizer = model.tokenizer;
    const pieces = Array.from({ length: model.vocabularySize }, (_, id) => (id < tokenizer.vocabularySize ? tokenizer.tokenPiece(id) : undefined));
    trie = TokenTrie.fromPieces(pieces, tokenizer.endOfGenerationTokenIds);
    tries.set(model, trie);
  }
  return trie;
}

/**
 * Compiles a `schema` or `grammar` option ahead of generation (it is cached, so generating with the
 * same schema object or grammar text reuses it): a bad schema or grammar fails here, with
 * JsonSchemaError or GrammarSyntaxError/GrammarError, before a model is even loaded.
 */
export function prepareOutputConstraint(options: Pick<ResolvedGenerateOptions, "schema" | "grammar"> & { readonly grammarTrigger?: string | undefined }): void {
  compile(options);
}

function compile(options: Pick<ResolvedGenerateOptions, "schema" | "grammar"> & { readonly grammarTrigger?: string | undefined }): Compiled | undefined {
  const { schema, grammar } = options;
  if (schema !== undefined && grammar !== undefined) throw new InvalidOptionError("schema", "give either schema or grammar, not both");
  if (options.grammarTrigger !== undefined && grammar === undefined) throw new InvalidOptionError("grammarTrigger", "grammarTrigger needs a grammar (the grammar it triggers)");
  if (schema !== undefined) {
    const key = schema as object;
    let compiled = typeof schema === "object" && schema !== null ? compiledSchemas.get(key) : undefined;
    if (!compiled) {
      const constraint = constraintFromSchema(schema);
      compiled = { constraint, automaton: new GrammarAutomaton(constraint.grammar), masks: new WeakMap() };
      if (typeof schema === "object" && schema !== null) compiledSchemas.set(key, compiled);
    }
    return compiled;
  }
  if (grammar !== undefined) {
    let compiled = compiledGrammars.get(grammar);
    if (!compiled) {
      const constraint = constraintFromGbnf(grammar);
      compiled = { constraint, automaton: new GrammarAutomaton(constraint.grammar), masks: new WeakMap() };
      if (compiledGrammars.size >= GRAMMAR_CACHE_ENTRIES) compiledGrammars.clear();
      compiledGrammars.set(grammar, compiled);
    }
    return compiled;
  }
  return undefined;
}

/** Qwen3's reasoning block: a trigger inside a leading one does not count (see `grammarTrigger`). */
const THINK_BLOCK = { open: "<think>", close: "</think>" } as const;

/**
 * The constraint a generation's `schema` (zod or JSON schema) or `grammar` (GBNF) option asks
 * for, or undefined. Grammars and tries are compiled once and reused, so are the masks.
 */
export function createGenerationConstraint(model: Model, options: ResolvedGenerateOptions): GenerationConstraint | undefined {
  const compiled = compile(options);
  if (!compiled) return undefined;
  const trie = modelTokenTrie(model);
  let masks = compiled.masks.get(trie);
  if (!masks) {
    masks = new Map();
    compiled.masks.set(trie, masks);
  }
  const matcher = new GrammarMatcher(compiled.automaton, trie, masks);
  const { constraint } = compiled;
  const trigger = options.grammarTrigger;
  if (trigger !== undefined) {
    let triggered: TriggeredSampler | undefined;
    return {
      wrap: (sampler) => {
        triggered = createTriggeredSampler(sampler, matcher, trigger, { mode: options.grammarMode, leadingBlock: THINK_BLOCK });
        return triggered;
      },
      isFinished: () => triggered?.isFinished === true,
      free: () => triggered?.triggered !== true,
      observe: (token) => triggered!.observe(token),
      parse: (text) => text,
    };
  }
  return {
    wrap: (sampler) => createConstrainedSampler(sampler, matcher, options.grammarMode),
    isFinished: () => matcher.isFinished,
    parse(text, finishReason) {
      if (!matcher.isAccepting && !matcher.isFinished) {
        throw new StructuredOutputError(`generation ended (${finishReason}) before the output was complete: ${JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text)}`, text, finishReason);
      }
      try {
        return constraint.parse(text);
      } catch (error) {
        throw new StructuredOutputError(`the output does not validate: ${error instanceof Error ? error.message : String(error)}`, text, finishReason, { cause: error });
      }
    },
  };
}
