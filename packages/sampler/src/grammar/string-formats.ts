/**
 * GBNF for the JSON schema string formats that OpenAI's structured outputs accept, as defined by
 * the formats' RFCs (the definitions JSON schema 2020-12 names): the text between the string's
 * quotes. Each grammar is a sound subset where the full form cannot be written as a grammar of
 * bounded size, so that what it allows always validates:
 * - date, time, date-time: RFC 3339 (days per month and leap years checked; `T` and `Z` in upper
 *   case; no leap second 60; at most 9 fraction digits; time and date-time carry an offset);
 * - duration: RFC 3339 appendix A (ISO 8601 durations, digits per part bounded);
 * - uuid: RFC 4122's 8-4-4-4-12 hex digits;
 * - ipv4: dotted quad without leading zeros; ipv6: RFC 4291's text forms with `::`, without an
 *   embedded IPv4 part;
 * - hostname: RFC 1123 labels of 1 to 63 letters, digits and inner hyphens, at most 4 labels so
 *   that the whole stays within 253 characters (the last label then at most 61);
 * - email: RFC 5321's dot-atom local part and a domain of at least two labels.
 * Rule bodies name their helpers with `@` for the rule prefix (a literal @ is written "\x40"); the
 * format's rule is `@format-<name>`.
 */
const DIGITS_PER_PART = "[0-9]{1,16}";

const HEX = "[0-9a-fA-F]";
const LABEL_CHARACTER = "[a-zA-Z0-9]";

export const STRING_FORMATS: Record<string, readonly (readonly [string, string])[]> = {
  date: [
    ["@format-date", '[0-9]{4} "-" @month-day | @leap-year "-02-29"'],
    [
      "@month-day",
      '( "01" | "03" | "05" | "07" | "08" | "10" | "12" ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "04" | "06" | "09" | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] )',
    ],
    // Divisible by 4 and not by 100, or divisible by 400.
    ["@leap-year", '[0-9]{2} ( [02468] [48] | [2468] "0" | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) "00"'],
  ],
  time: [
    ["@format-time", '@hour ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] @hour ":" [0-5] [0-9] )'],
    ["@hour", '[01] [0-9] | "2" [0-3]'],
  ],
  "date-time": [["@format-date-time", '@format-date "T" @format-time']],
  duration: [
    ["@format-duration", '"P" ( ( @duration-day | @duration-month | @duration-year ) @duration-time? | @duration-time | @duration-week )'],
    ["@duration-time", '"T" ( @duration-hour | @duration-minute | @duration-second )'],
    ["@duration-second", `${DIGITS_PER_PART} "S"`],
    ["@duration-minute", `${DIGITS_PER_PART} "M" @duration-second?`],
    ["@duration-hour", `${DIGITS_PER_PART} "H" @duration-minute?`],
    ["@duration-day", `${DIGITS_PER_PART} "D"`],
    ["@duration-week", `${DIGITS_PER_PART} "W"`],
    ["@duration-month", `${DIGITS_PER_PART} "M" @duration-day?`],
    ["@duration-year", `${DIGITS_PER_PART} "Y" @duration-month?`],
  ],
  uuid: [["@format-uuid", `${HEX}{8} "-" ${HEX}{4} "-" ${HEX}{4} "-" ${HEX}{4} "-" ${HEX}{12}`]],
  ipv4: [
    ["@format-ipv4", '@ipv4-octet ( "." @ipv4-octet ){3}'],
    ["@ipv4-octet", '"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]'],
  ],
  ipv6: [
    [
      "@format-ipv6",
      [
        '( @h16 ":" ){7} @h16',
        '( @h16 ":" ){1,7} ":"',
        '( @h16 ":" ){1,6} ":" @h16',
        '( @h16 ":" ){1,5} ( ":" @h16 ){1,2}',
        '( @h16 ":" ){1,4} ( ":" @h16 ){1,3}',
        '( @h16 ":" ){1,3} ( ":" @h16 ){1,4}',
        '( @h16 ":" ){1,2} ( ":" @h16 ){1,5}',
        '@h16 ":" ( ":" @h16 ){1,6}',
        '":" ( ( ":" @h16 ){1,7} | ":" )',
      ].join(" | "),
    ],
    ["@h16", `${HEX}{1,4}`],
  ],
  hostname: [
    ["@format-hostname", '@label ( "." @label ){0,2} ( "." @label-61 )?'],
    ["@label", `${LABEL_CHARACTER} ( [a-zA-Z0-9-]{0,61} ${LABEL_CHARACTER} )?`],
    ["@label-61", `${LABEL_CHARACTER} ( [a-zA-Z0-9-]{0,59} ${LABEL_CHARACTER} )?`],
  ],
  email: [
    ["@format-email", '@email-atom ( "." @email-atom )* "\\x40" @email-label ( "." @email-label )+'],
    ["@email-atom", "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+"],
    ["@email-label", `${LABEL_CHARACTER} ( [a-zA-Z0-9-]* ${LABEL_CHARACTER} )?`],
  ],
};

/** The rules of a format's grammar under a rule prefix (dependencies included); its rule is first. */
export function stringFormatRules(format: string, prefix: string): [string, string][] | undefined {
  const rules = STRING_FORMATS[format];
  if (!rules) return undefined;
  const out: [string, string][] = [];
  const seen = new Set<string>();
  const add = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    const own = Object.values(STRING_FORMATS)
      .flat()
      .find(([ruleName]) => ruleName === name);
    if (!own) throw new Error(`string format rule ${name} is not defined`);
    const body = own[1];
    out.push([name.replace("@", prefix), body.replaceAll(/@(?=[a-z])/g, prefix)]);
    for (const reference of body.match(/@[a-z0-9-]+/g) ?? []) add(reference);
  };
  add(rules[0]![0]);
  return out;
}
