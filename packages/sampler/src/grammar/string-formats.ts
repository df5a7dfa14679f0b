/**
 * The JSON schema string formats that OpenAI's structured outputs accept, as defined by the
 * formats' RFCs (the definitions JSON schema 2020-12 names), each as an anchored ECMAScript
 * regular expression (u flag) that `patternToGbnf` turns into a grammar like any `pattern`, and
 * that length bounds intersect like one. Each is a sound subset where the full form cannot be
 * written as a grammar of bounded size, so that what it allows always validates:
 * - date, time, date-time: RFC 3339 (days per month and leap years checked; `T` and `Z` in upper
 *   case; no leap second 60; at most 9 fraction digits; time and date-time carry an offset);
 * - duration: RFC 3339 appendix A (ISO 8601 durations, digits per part bounded);
 * - uuid: RFC 4122's 8-4-4-4-12 hex digits;
 * - ipv4: dotted quad without leading zeros; ipv6: RFC 4291's text forms with `::`, without an
 *   embedded IPv4 part;
 * - hostname: RFC 1123 labels of 1 to 63 letters, digits and inner hyphens, at most 4 labels so
 *   that the whole stays within 253 characters (the last label then at most 61);
 * - email: RFC 5321's dot-atom local part and a domain of at least two labels.
 */
const DIGITS_PER_PART = "[0-9]{1,16}";
const HEX = "[0-9a-fA-F]";
const LABEL_CHARACTER = "[a-zA-Z0-9]";

const MONTH_DAY = [
  "(?:01|03|05|07|08|10|12)-(?:0[1-9]|[12][0-9]|3[01])",
  "(?:04|06|09|11)-(?:0[1-9]|[12][0-9]|30)",
  "02-(?:0[1-9]|1[0-9]|2[0-8])",
].join("|");
// Divisible by 4 and not by 100, or divisible by 400.
const LEAP_YEAR = "[0-9]{2}(?:[02468][48]|[2468]0|[13579][26])|(?:[02468][048]|[13579][26])00";
const DATE = `(?:[0-9]{4}-(?:${MONTH_DAY})|(?:${LEAP_YEAR})-02-29)`;
const HOUR = "(?:[01][0-9]|2[0-3])";
const TIME = `${HOUR}:[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-]${HOUR}:[0-5][0-9])`;

const DURATION_SECOND = `${DIGITS_PER_PART}S`;
const DURATION_MINUTE = `${DIGITS_PER_PART}M(?:${DURATION_SECOND})?`;
const DURATION_HOUR = `${DIGITS_PER_PART}H(?:${DURATION_MINUTE})?`;
const DURATION_TIME = `T(?:${DURATION_HOUR}|${DURATION_MINUTE}|${DURATION_SECOND})`;
const DURATION_DAY = `${DIGITS_PER_PART}D`;
const DURATION_MONTH = `${DIGITS_PER_PART}M(?:${DURATION_DAY})?`;
const DURATION_YEAR = `${DIGITS_PER_PART}Y(?:${DURATION_MONTH})?`;
const DURATION_WEEK = `${DIGITS_PER_PART}W`;

const IPV4_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";
const H16 = `${HEX}{1,4}`;
const IPV6 = [
  `(?:${H16}:){7}${H16}`,
  `(?:${H16}:){1,7}:`,
  `(?:${H16}:){1,6}:${H16}`,
  `(?:${H16}:){1,5}(?::${H16}){1,2}`,
  `(?:${H16}:){1,4}(?::${H16}){1,3}`,
  `(?:${H16}:){1,3}(?::${H16}){1,4}`,
  `(?:${H16}:){1,2}(?::${H16}){1,5}`,
  `${H16}:(?::${H16}){1,6}`,
  `:(?:(?::${H16}){1,7}|:)`,
].join("|");

const HOST_LABEL = `${LABEL_CHARACTER}(?:[a-zA-Z0-9-]{0,61}${LABEL_CHARACTER})?`;
const HOST_LABEL_61 = `${LABEL_CHARACTER}(?:[a-zA-Z0-9-]{0,59}${LABEL_CHARACTER})?`;
const EMAIL_ATOM = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+";
const EMAIL_LABEL = `${LABEL_CHARACTER}(?:[a-zA-Z0-9-]*${LABEL_CHARACTER})?`;

export const STRING_FORMATS: Readonly<Record<string, string>> = {
  date: `^${DATE}$`,
  time: `^${TIME}$`,
  "date-time": `^${DATE}T${TIME}$`,
  duration: `^P(?:(?:${DURATION_DAY}|${DURATION_MONTH}|${DURATION_YEAR})(?:${DURATION_TIME})?|${DURATION_TIME}|${DURATION_WEEK})$`,
  uuid: `^${HEX}{8}-${HEX}{4}-${HEX}{4}-${HEX}{4}-${HEX}{12}$`,
  ipv4: `^${IPV4_OCTET}(?:\\.${IPV4_OCTET}){3}$`,
  ipv6: `^(?:${IPV6})$`,
  hostname: `^${HOST_LABEL}(?:\\.${HOST_LABEL}){0,2}(?:\\.${HOST_LABEL_61})?$`,
  email: `^${EMAIL_ATOM}(?:\\.${EMAIL_ATOM})*@${EMAIL_LABEL}(?:\\.${EMAIL_LABEL})+$`,
};
