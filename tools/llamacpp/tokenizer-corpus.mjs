// The strings whose llama.cpp tokens become the tokenizer goldens (see tokenizer-goldens.mjs).
// Deterministic: the same list on every run.

/** mulberry32: a small seeded PRNG. */
export function seededRandom(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const prose = [
  "The quick brown fox jumps over the lazy dog.",
  "Hello, world!",
  "In the beginning God created the heaven and the earth.",
  "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness...",
  "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse, I thought I would sail about a little.",
  "“Curiouser and curiouser!” cried Alice (she was so much surprised, that for the moment she quite forgot how to speak good English).",
  "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer the slings and arrows of outrageous fortune.",
  "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were perfectly normal, thank you very much.",
  "The U.S.A. has 50 states; the E.U. had 28 members until 2020.",
  "e.g. i.e. etc. vs. a.m. p.m. Dr. St. Jr. Ph.D.",
  "Email me at john.doe+tag@example.co.uk or visit https://example.com/path?query=1&b=two#frag.",
  "Version 3.14.159-beta.2 was released on 2024-01-05T12:34:56Z.",
  "He said: \"Don't do that!\" and she replied: 'Why not?'",
  "Prices: $5.99, €4,50, £3.20, ¥500, ₹1,299.00, 20% off!!!",
  "A sentence with    multiple   spaces between words.",
  "Trailing spaces at the end   ",
  "   Leading spaces at the start",
  "Line one\nLine two\nLine three",
  "Windows line endings\r\nare here\r\nand here\r\n",
  "Old Mac line endings\rare here\r",
  "Tabs\tbetween\twords\t\tand\t\t\tmore",
  "Mixed\t \t whitespace \n\t\n  everywhere",
  "UPPERCASE SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!",
  "camelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_SNAKE_CASE",
  "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
  "The café's naïve façade—a coöperative résumé.",
  "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
  "Voix ambiguë d'un cœur qui au zéphyr préfère les jattes de kiwis.",
  "El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío, añoraba a su querido cachorro.",
  "Pchnąć w tę łódź jeża lub ośm skrzyń fig.",
  "Příliš žluťoučký kůň úpěl ďábelské ódy.",
  "Árvíztűrő tükörfúrógép.",
  "Съешь же ещё этих мягких французских булок, да выпей чаю.",
  "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός.",
  "Pijamalı hasta yağız şoföre çabucak güvendi.",
  "Jeżu klątw, spłódź Finom część gry hańb!",
  "Quizdeltagerne spiste jordbær med fløde, mens cirkusklovnen Walther spillede på xylofon.",
  "Þú ert að læra íslensku.",
  "Tiếng Việt có dấu: Tôi yêu tiếng nước tôi từ khi mới ra đời.",
  "Ekspedisi ke gunung itu memakan waktu tiga hari.",
  "Markdown **bold** _italic_ `code` [link](http://x.y) > quote\n- item 1\n- item 2\n\n1. first\n2. second",
  "| Name | Age |\n|------|-----|\n| Ann  |  31 |\n| Bob  |  27 |",
  "LaTeX: $\\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}$ and \\(\\alpha + \\beta\\).",
  "Math symbols: ∀x ∈ ℝ, ∃y: x² + y² ≤ 1; ∑ᵢ aᵢ ≈ π ≠ ∞ ⇒ √2 ∉ ℚ.",
  "Arrows → ← ↑ ↓ ⇐ ⇔ and boxes ┌─┐│└┘ and blocks ░▒▓█.",
  "Ellipsis… em—dash en–dash ‘single’ “double” «guillemets» ‹single›.",
];

const code = [
  "function add(a, b) {\n  return a + b;\n}\n\nconsole.log(add(1, 2));",
  "const xs = [1, 2, 3].map((x) => x * 2).filter(Boolean);\nexport default xs;",
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])",
  "class Point:\n    def __init__(self, x: float, y: float) -> None:\n        self.x, self.y = x, y\n\n    def __repr__(self):\n        return f\"Point({self.x!r}, {self.y!r})\"",
  "fn main() {\n    let v: Vec<u32> = (0..10).collect();\n    println!(\"{:?}\", v.iter().sum::<u32>());\n}",
  "impl<'a, T: Clone + 'a> Iterator for Foo<'a, T> {\n    type Item = &'a T;\n}",
  "#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tprintf(\"Hello, %s!\\n\", argv[0]);\n\treturn 0;\n}",
  "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfor i := 0; i < 3; i++ {\n\t\tfmt.Println(i)\n\t}\n}",
  "SELECT u.id, COUNT(*) AS n\nFROM users u\nJOIN orders o ON o.user_id = u.id\nWHERE o.total > 100.0\nGROUP BY u.id\nHAVING n >= 2;",
  "<!DOCTYPE html>\n<html lang=\"en\">\n  <head><meta charset=\"utf-8\"><title>Test</title></head>\n  <body><div class=\"a b\" id='x'>Hi &amp; bye</div></body>\n</html>",
  "{\"name\": \"memra\", \"version\": \"0.0.0\", \"nested\": {\"array\": [1, 2.5, -3e10, true, null], \"s\": \"\\u00e9\\n\"}}",
  "#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n  echo \"${f%.txt}\" | tr '[:lower:]' '[:upper:]' >> out.log 2>&1\ndone",
  "main :: IO ()\nmain = mapM_ print $ takeWhile (< 100) $ map (^2) [1..]",
  "(defun factorial (n)\n  (if (<= n 1)\n      1\n      (* n (factorial (- n 1)))))",
  "public static void main(String[] args) throws IOException {\n    Map<String, List<Integer>> m = new HashMap<>();\n}",
  "template <typename T>\nconstexpr auto square(T&& x) noexcept -> decltype(x * x) { return x * x; }",
  "let re = /^(?:[a-z0-9!#$%&'*+\\/=?^_`{|}~-]+)@(?:[a-z0-9-]+\\.)+[a-z]{2,}$/i;",
  "x = {'a': 1, \"b\": [2, 3], 'c': {'d': None}}\nassert x['a'] == 1, \"oops\"",
  "    indented with four spaces\n        and eight\n\t\tand two tabs\n",
  "if (a && b || !c) { x += 1; y -= 2; z *= 3; w /= 4; v %= 5; u <<= 1; t >>>= 2; }",
  "a<=b a>=b a==b a!=b a===b a!==b a=>b a->b a::b a..b a...b a?.b a??b a**b a//b",
  "// comment\n/* block\n   comment */\n# hash comment\n-- sql comment\n<!-- html comment -->",
  "diff --git a/x.ts b/x.ts\n@@ -1,3 +1,4 @@\n-const a = 1;\n+const a = 2;\n+const b = 3;\n ",
  "0x1F 0b1010 0o777 1_000_000 3.14e-10 .5 5. 1e+100 NaN -Infinity",
  "    def f(self):\r\n        return 1\r\n",
];

const cjk = [
  "你好，世界！",
  "我爱北京天安门，天安门上太阳升。",
  "机器学习是人工智能的一个分支，它使计算机能够从数据中学习。",
  "今天天气很好，我们去公园散步吧。",
  "《红楼梦》是中国古典四大名著之一。",
  "中文标点：，。！？；：“”‘’（）【】《》、…—",
  "こんにちは世界",
  "日本語のテキストには、ひらがな、カタカナ、漢字が含まれます。",
  "東京タワーは高さ333メートルです。",
  "ｶﾀｶﾅ（半角）とカタカナ（全角）",
  "안녕하세요, 세계!",
  "한국어는 한글로 씁니다. 서울은 대한민국의 수도입니다.",
  "Mixed 中文 and English 混合 text 123 数字",
  "ＡＢＣ１２３　全角スペース　と　全角英数字",
  "繁體中文：臺灣的首都是臺北。",
  "𠀀𠀁𠀂 CJK Extension B characters 𪚥",
  "〇一二三四五六七八九十百千万亿",
  "第１章　はじめに\n第２章　方法",
  "Qwen（通义千问）是阿里云研发的大语言模型。",
  "私はGPUでLLMを動かします。",
];

const scripts = [
  "مرحبا بالعالم",
  "اللغة العربية جميلة جداً، وهي لغة القرآن الكريم.",
  "السلام عليكم ورحمة الله وبركاته ١٢٣٤٥٦٧٨٩٠",
  "عَرَبِيٌّ مُشَكَّلٌ بِالْحَرَكَاتِ",
  "שלום עולם! עברית נכתבת מימין לשמאל.",
  "नमस्ते दुनिया",
  "हिन्दी भारत की राजभाषा है। मैं हिंदी बोलता हूँ।",
  "संस्कृतम् ॐ नमः शिवाय १२३४५",
  "ক্ষমা করবেন, আমি বাংলা বলি।",
  "தமிழ் ஒரு அழகான மொழி.",
  "తెలుగు భాష",
  "ಕನ್ನಡ ಭಾಷೆ",
  "മലയാളം",
  "ગુજરાતી",
  "ਪੰਜਾਬੀ ਭਾਸ਼ਾ",
  "සිංහල",
  "สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
  "ພາສາລາວ",
  "ភាសាខ្មែរ",
  "မြန်မာဘာသာ",
  "ᠮᠣᠩᠭᠣᠯ",
  "བོད་ཡིག",
  "Ελληνικά: Καλημέρα κόσμε",
  "Русский язык: Привет, мир! Ёлка, щётка, объём.",
  "Українська: Ґанок, їжак, є.",
  "Հայերեն լեզու",
  "ქართული ენა",
  "አማርኛ ቋንቋ",
  "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ",
  "ᚠᚢᚦᚨᚱᚲ runes",
  "ꦧꦱꦗꦮ Javanese",
  "Ṭhis ḥas ďiaċritics ẅith dots ḃelow and ȧbove",
];

const emoji = [
  "🙂",
  "😀😃😄😁😆😅😂🤣",
  "👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿",
  "👨‍👩‍👧‍👦 family",
  "👩🏽‍💻 woman technologist, medium skin tone",
  "🏳️‍🌈 🏳️‍⚧️ 🏴‍☠️",
  "🇺🇸🇬🇧🇯🇵🇨🇳🇩🇪🇫🇷",
  "1️⃣ 2️⃣ #️⃣ *️⃣",
  "❤️ ❤ ♥️ ☺️ ✌️ ✔️",
  "🧑‍🤝‍🧑 🫱🏼‍🫲🏿 🧔🏻‍♀️",
  "I ❤️ NY! 🚀🔥💯",
  "😀abc😀 😀 😀  😀",
  "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland flag tag sequence",
  "emoji at end 🎉",
  "🎉 emoji at start",
  "🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂",
  "👁️‍🗨️ 🐕‍🦺 🐈‍⬛ 🐻‍❄️",
  "🫠🫡🫢🫣🫤🥹",
  "text🙂text",
  "⌚⌛⏰⏳☀☁☂☃",
];

const combining = [
  "e\u0301 a\u0300 o\u0302 u\u0308 n\u0303",
  "cafe\u0301",
  "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333!",
  "\u0301 leading combining mark",
  "a\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308",
  "ḱṷṓn",
  "Å vs A\u030a vs \u212b",
  "ﬁ ﬂ ﬀ ligatures",
  "한\u1100\u1161\u11a8 jamo",
  "क्षत्रिय",
  "x\u20d7 vector arrow",
  "\u0915\u094d\u200d\u0937 ZWJ in Devanagari",
  "ZWNJ: می\u200cخواهم",
  "zero\u200bwidth\u200bspace",
  "word\u2060joiner\ufeffbom-inside",
];

const numbers = [
  "0",
  "7",
  "12",
  "123",
  "1234",
  "12345678901234567890",
  "3.14159265358979323846264338327950288419716939937510",
  "1,234,567.89",
  "1 234 567",
  "+1 (555) 123-4567",
  "2024-02-29 23:59:59.999",
  "٠١٢٣٤٥٦٧٨٩ Arabic-Indic digits",
  "۰۱۲۳۴۵۶۷۸۹ Persian digits",
  "०१२३४५६७८९ Devanagari digits",
  "０１２３４５６７８９ fullwidth digits",
  "x² + y³ = z⁴, H₂O, CO₂",
  "½ ¼ ¾ ⅓ ⅔ ⅛",
  "Ⅰ Ⅱ Ⅲ Ⅳ Ⅻ ⅿ roman numerals",
  "① ② ③ ⑩ ⑳ circled",
  "𝟎𝟏𝟐𝟑 𝟘𝟙𝟚 mathematical digits",
  "99999999999999999999999999999999999999999999999999999999999999999999999999999999",
  "a1b2c3d4e5f6",
  "v1.2.3 v10.20.30",
  "0.000000001 1e-9 6.022e23",
  "-42 +42 ±42 −42",
];

const whitespace = [
  " ",
  "  ",
  "   ",
  "    ",
  "        ",
  " ".repeat(33),
  "\t",
  "\t\t",
  "\n",
  "\n\n",
  "\n\n\n\n\n",
  "\r\n",
  "\r\n\r\n",
  "\r",
  "\r\r\n\n",
  " \n",
  "\n ",
  " \n ",
  "  \n  ",
  "\t\n\t",
  "a\n\n\nb",
  "a \n b",
  "a  \n  b",
  "a\t\t\n\t\tb",
  "a\u00a0b\u00a0\u00a0c",
  "a\u2000b\u2001c\u2002d\u2003e\u2004f\u2005g\u2006h\u2007i\u2008j\u2009k\u200al",
  "ideographic\u3000space\u3000\u3000x",
  "narrow\u202fno-break\u205fmedium math space",
  "ogham\u1680space mark",
  "line\u2028separator paragraph\u2029separator",
  "next\u0085line",
  "vertical\u000btab form\u000cfeed",
  "file\u001cgroup\u001drecord\u001eunit\u001fseparators",
  "  \u00a0 \u3000  mixed unicode spaces  ",
  "word \u00a0word",
  "end with nbsp\u00a0",
  "\u00a0\u00a0start with nbsp",
  "spaces before punctuation ,  .  !  ?",
  " leading single space",
  "trailing newline\n",
  "two trailing newlines\n\n",
  "   \t   \n   \t   ",
  "a\r\n\r\n\r\nb",
  "x \r\n y",
  "\u3000\u3000",
];

const contractions = [
  "don't won't can't isn't aren't wasn't weren't",
  "I'm you're he's she's it's we're they're",
  "I've you've we've they've",
  "I'll you'll he'll she'll we'll they'll",
  "I'd you'd he'd she'd we'd they'd",
  "DON'T WON'T CAN'T ISN'T",
  "I'M YOU'RE HE'S IT'S",
  "I'VE YOU'VE WE'VE",
  "I'LL YOU'LL WE'LL",
  "I'D YOU'D WE'D",
  "It'S We'Re They'Ve I'Ll She'D He'M",
  "'s 't 're 've 'm 'll 'd",
  "'S 'T 'RE 'VE 'M 'LL 'D",
  "the dog's bone, the dogs' bones",
  "rock 'n' roll, 'tis, 'twas, y'all, o'clock",
  "it’s curly, don’t, I’LL",
  "''quoted'' and '''triple'''",
  "ends with apostrophe'",
  "'starts with apostrophe",
  "a'b a'bc a'sd a'll'll'll",
  "'''s''t",
  "1's 2'll 3're",
  "x'ReY x'LlY x'VeY",
  "' s ' t",
  "Jack's and Jill's",
];

const specials = [
  "<|im_start|>",
  "<|im_end|>",
  "<|endoftext|>",
  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
  "<|im_start|>assistant\n<think>\nLet me think about this.\n</think>\n\nThe answer is 4.<|im_end|>",
  "<think>",
  "</think>",
  "<think></think>",
  "<think>\n\n</think>\n\n",
  "text<think>inside</think>text",
  " <think> spaced </think> ",
  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
  "<tool_response>\n{\"temperature\": 21}\n</tool_response>",
  "<|fim_prefix|>def f():\n    <|fim_suffix|>\n    return x<|fim_middle|>",
  "<|repo_name|>memra<|file_sep|>src/index.ts",
  "<|object_ref_start|>the cat<|object_ref_end|><|box_start|>(1,2),(3,4)<|box_end|>",
  "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>",
  "<|im_start|><|im_start|><|im_end|><|im_end|>",
  "<|im_start",
  "im_start|>",
  "<|im_start|",
  "<think",
  "think>",
  "</think",
  "<<think>>",
  "<|<|im_end|>|>",
  "<|endoftext|><|endoftext|>hello<|endoftext|>",
  "[PAD151669] [PAD151935]",
  "<|unknown_token|> <|not_a_token|>",
  "before<|im_end|>after",
  "<|im_start|>user\n你好<|im_end|>\n",
  "<|quad_start|><|quad_end|><|video_pad|><|vision_pad|>",
];

const edges = [
  "",
  "a",
  "A",
  ".",
  "'",
  "\u0000",
  "a\u0000b",
  Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join(""),
  "\u007f\u0080\u0081\u009f",
  Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join(""),
  "\ufeffBOM at start",
  "\ufffd replacement char",
  "lone high surrogate \ud800 here",
  "lone low surrogate \udc00 here",
  "\ud83d",
  "\ue000\uf8ff private use",
  "\uffff\ufffe noncharacters",
  "𝐀𝐁𝐂 𝑎𝑏𝑐 𝔸𝔹ℂ math alphanumerics",
  "𐀀𐀁 Linear B",
  "a".repeat(2000),
  "ab".repeat(500),
  "!".repeat(300),
  "-".repeat(80),
  "=".repeat(40) + "\n" + "=".repeat(40),
  "...",
  "?!?!?!",
  "¿Qué? ¡Sí!",
  "#".repeat(6) + " heading",
  "http://localhost:8080/api/v1/users/42?fields=name,email&sort=-created_at",
  "C:\\Users\\name\\Documents\\file.txt",
  "/usr/local/bin/../lib/./x.so",
  "user@host:~$ ls -la | grep '^d' > dirs.txt",
  "SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dC4=",
  "d41d8cd98f00b204e9800998ecf8427e",
  "550e8400-e29b-41d4-a716-446655440000",
  "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖ×ØÙÚÛÜÝÞßàáâãäåæçèéêëìíîïðñòóôõö÷øùúûüýþÿ",
  "¡¢£¤¥¦§¨©ª«¬\u00ad®¯°±²³´µ¶·¸¹º»¼½¾¿",
  "ĀāĂăĄąĆćĈĉĊċČčĎďĐđĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĦħĨĩĪīĬĭĮįİıĲĳĴĵĶķĸĹĺĻļĽľĿŀŁł",
  "ǅ ǈ ǋ ǲ titlecase digraphs",
  "ʰʲʷˠˤ modifier letters ˆˇˉ",
  "\u00b5 micro vs \u03bc mu, \u212a kelvin, \u2126 ohm",
  "İstanbul ıi ẞ ß ſ",
];

const chars = [
  "a", "b", "c", "x", "Z", "Q", "e", " ", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "'", "'s", "'S", "'ll", "'LL", "'re",
  "0", "1", "9", "42", ".", ",", "!", "?", "-", "_", "(", ")", "{", "}", "[", "]", "<", ">", "/", "\\", "\"", "#", "@",
  "é", "ß", "ñ", "ø", "中", "文", "日", "本", "語", "한", "글", "ع", "ر", "ب", "ि", "न", "्", "\u0301", "\u0308",
  "🙂", "👍🏽", "👨‍👩‍👧", "🇯🇵", "\u00a0", "\u3000", "\u2003", "\u200b", "\u200d", "\ufeff", "½", "²", "Ⅻ", "①", "٣",
  "<think>", "</think>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "<|", "|>", "<", "think", "$", "€",
];

function randomStrings(count, seed) {
  const random = seededRandom(seed);
  const out = [];
  for (let i = 0; i < count; i++) {
    const length = 1 + Math.floor(random() * (i % 4 === 0 ? 120 : 30));
    let text = "";
    for (let j = 0; j < length; j++) text += chars[Math.floor(random() * chars.length)];
    out.push(text);
  }
  return out;
}

/** A ~20 kB mixed document: prose, code, CJK, other scripts, numbers, emoji, CRLF and tab runs. */
function longDocument() {
  const random = seededRandom(20240601);
  const pools = [prose, code, cjk, scripts, emoji, combining, numbers, contractions, whitespace];
  const parts = ["# A long mixed document\r\n\r\n"];
  let length = parts[0].length;
  while (length < 20_480) {
    const pool = pools[Math.floor(random() * pools.length)];
    const piece = pool[Math.floor(random() * pool.length)];
    const separator = ["\n\n", "\n", " ", "\r\n", "\t", "  "][Math.floor(random() * 6)];
    parts.push(piece, separator);
    length += piece.length + separator.length;
  }
  return parts.join("");
}

/** The golden corpus: [category, text] pairs. */
export function tokenizerCorpus() {
  const corpus = [];
  const add = (category, texts) => {
    for (const text of texts) corpus.push([category, text]);
  };
  add("prose", prose);
  add("code", code);
  add("cjk", cjk);
  add("scripts", scripts);
  add("emoji", emoji);
  add("combining", combining);
  add("numbers", numbers);
  add("whitespace", whitespace);
  add("contractions", contractions);
  add("specials", specials);
  add("edges", edges);
  add("random", randomStrings(80, 7));
  add("document", [longDocument()]);
  return corpus;
}
