//! A small parser of CEL's expression syntax (cel-go's grammar, as far as a selector's
//! text reaches): the syntax tree kube-apiserver walks to read a shard selector
//! (`shards`), so that CEL that is not a shard selector gets kube's own message.

/// How deep CEL's syntax may nest before the parser refuses it.
const MAX_DEPTH: usize = 100;

/// How many tokens a selector may have (hundreds of ranges), so that no selector nests
/// deep enough to exhaust the stack.
const MAX_TOKENS: usize = 10_000;

/// CEL's syntax tree, as far as a shard selector's walk tells kinds apart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Ident(String),
    Select(Box<Expr>, String),
    /// A function or operator (`_||_`, `_&&_`, `!_`, ...) and its arguments (a method's
    /// receiver not among them, as in CEL's `Args()`).
    Call {
        function: String,
        args: Vec<Expr>,
    },
    Literal(Literal),
    List,
    Map,
}

impl Expr {
    /// cel-go's `ast.ExprKind` number, as kube prints it.
    pub(crate) fn kind(&self) -> u8 {
        match self {
            Expr::Call { .. } => 1,
            Expr::Ident(_) => 3,
            Expr::List => 4,
            Expr::Literal(_) => 5,
            Expr::Map => 6,
            Expr::Select(..) => 7,
        }
    }

    fn call(function: &str, args: Vec<Expr>) -> Expr {
        Expr::Call {
            function: function.to_owned(),
            args,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Literal {
    Str(String),
    Bytes,
    Int,
    Uint,
    Double,
    Bool,
    Null,
}

impl Literal {
    /// The Go type cel-go gives the literal's value, as kube prints it.
    pub(crate) fn go_type(&self) -> &'static str {
        match self {
            Literal::Str(_) => "string",
            Literal::Bytes => "[]uint8",
            Literal::Int => "int64",
            Literal::Uint => "uint64",
            Literal::Double => "float64",
            Literal::Bool => "bool",
            Literal::Null => "structpb.NullValue",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Literal(Literal),
    Punct(&'static str),
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Ident(name) => write!(f, "'{name}'"),
            Token::Literal(_) => f.write_str("a literal"),
            Token::Punct(p) => write!(f, "'{p}'"),
        }
    }
}

/// Operators and punctuation, longest first.
const PUNCTUATION: [&str; 25] = [
    "||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "(", ")", "[", "]",
    "{", "}", ",", ".", "?", ":", "=",
];

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if out.len() > MAX_TOKENS {
            return Err(format!("expression longer than {MAX_TOKENS} tokens"));
        }
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
            continue;
        }
        // CEL's lexer reads `.1` as a number wherever it is.
        if c.is_ascii_digit() || c == '.' && rest[1..].starts_with(|d: char| d.is_ascii_digit()) {
            let (literal, len) = number(rest);
            out.push(Token::Literal(literal));
            rest = &rest[len..];
            continue;
        }
        if let Some((literal, len)) = string(rest)? {
            out.push(Token::Literal(literal));
            rest = &rest[len..];
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let len = rest
                .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .unwrap_or(rest.len());
            let word = &rest[..len];
            out.push(match word {
                "true" | "false" => Token::Literal(Literal::Bool),
                "null" => Token::Literal(Literal::Null),
                "in" => Token::Punct("in"),
                _ => Token::Ident(word.to_owned()),
            });
            rest = &rest[len..];
            continue;
        }
        let Some(p) = PUNCTUATION.into_iter().find(|p| rest.starts_with(p)) else {
            return Err(format!("token recognition error at: '{c}'"));
        };
        if p == "=" {
            return Err("token recognition error at: '='".into());
        }
        out.push(Token::Punct(p));
        rest = &rest[p.len()..];
    }
    Ok(out)
}

/// A number at the start of `text` (which starts with a digit, or a dot and a digit) and
/// its length.
fn number(text: &str) -> (Literal, usize) {
    let bytes = text.as_bytes();
    let mut len = 0;
    let hex = text.starts_with("0x") || text.starts_with("0X");
    if hex {
        len = 2;
        while bytes.get(len).is_some_and(u8::is_ascii_hexdigit) {
            len += 1;
        }
    } else {
        while bytes.get(len).is_some_and(u8::is_ascii_digit) {
            len += 1;
        }
    }
    let mut double = false;
    if !hex && bytes.get(len) == Some(&b'.') && bytes.get(len + 1).is_some_and(u8::is_ascii_digit) {
        double = true;
        len += 1;
        while bytes.get(len).is_some_and(u8::is_ascii_digit) {
            len += 1;
        }
    }
    if !hex && matches!(bytes.get(len), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(len + 1), Some(b'+' | b'-')));
        if bytes.get(len + 1 + sign).is_some_and(u8::is_ascii_digit) {
            double = true;
            len += 1 + sign;
            while bytes.get(len).is_some_and(u8::is_ascii_digit) {
                len += 1;
            }
        }
    }
    if double {
        return (Literal::Double, len);
    }
    if matches!(bytes.get(len), Some(b'u' | b'U')) {
        return (Literal::Uint, len + 1);
    }
    (Literal::Int, len)
}

/// A string or bytes literal at the start of `text` (with CEL's `r` and `b` prefixes,
/// single, double or triple quotes) and its length; `None` if none starts there.
fn string(text: &str) -> Result<Option<(Literal, usize)>, String> {
    let prefix_len = text
        .find(|c: char| !matches!(c, 'r' | 'R' | 'b' | 'B'))
        .unwrap_or(text.len())
        .min(2);
    let prefix = text[..prefix_len].to_ascii_lowercase();
    let Some(prefix) = ["", "r", "b", "rb", "br"]
        .into_iter()
        .filter(|p| prefix.starts_with(p))
        .rev()
        .find(|p| text[p.len()..].starts_with(['\'', '"']))
    else {
        return Ok(None);
    };
    let raw = prefix.contains('r');
    let body = &text[prefix.len()..];
    let quote = ["'''", "\"\"\"", "'", "\""]
        .into_iter()
        .find(|q| body.starts_with(q))
        .unwrap_or("'");
    let mut value = String::new();
    let mut chars = body[quote.len()..].char_indices();
    let unterminated = || format!("token recognition error at: '{}'", &text[..1]);
    loop {
        let (at, c) = chars.next().ok_or_else(unterminated)?;
        let here = &body[quote.len() + at..];
        if here.starts_with(quote) {
            let len = prefix.len() + quote.len() * 2 + at;
            let literal = if prefix.contains('b') {
                Literal::Bytes
            } else {
                Literal::Str(value)
            };
            return Ok(Some((literal, len)));
        }
        if (c == '\n' || c == '\r') && quote.len() == 1 {
            return Err(unterminated());
        }
        if c != '\\' || raw {
            value.push(c);
            continue;
        }
        let (_, escaped) = chars.next().ok_or_else(unterminated)?;
        let mut hex = |n: usize| -> Result<char, String> {
            let digits: String = (0..n)
                .filter_map(|_| chars.next().map(|(_, c)| c))
                .collect();
            u32::from_str_radix(&digits, 16)
                .ok()
                .filter(|_| digits.len() == n)
                .and_then(char::from_u32)
                .ok_or_else(|| format!("token recognition error at: '\\{escaped}{digits}'"))
        };
        value.push(match escaped {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            'x' | 'X' => hex(2)?,
            'u' => hex(4)?,
            'U' => hex(8)?,
            '\\' | '\'' | '"' | '`' | '?' => escaped,
            other => return Err(format!("token recognition error at: '\\{other}'")),
        });
    }
}

/// A recursive-descent parser of CEL's expressions (its grammar's precedence: `? :`,
/// `||`, `&&`, relations, `+ -`, `* / %`, unary `! -`, member access, primaries).
pub(crate) struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
}

pub(crate) type Parsed = Result<Expr, String>;

impl Parser {
    pub(crate) fn new(text: &str) -> Result<Parser, String> {
        Ok(Parser {
            tokens: tokens(text)?,
            at: 0,
            depth: 0,
        })
    }

    pub(crate) fn whole(mut self) -> Parsed {
        let expr = self.expr()?;
        match self.peek() {
            None => Ok(expr),
            Some(extra) => Err(format!("extraneous input {extra} expecting <EOF>")),
        }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, punct: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Punct(p)) if *p == punct);
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, punct: &str) -> Result<(), String> {
        if self.eat(punct) {
            return Ok(());
        }
        Err(match self.peek() {
            None => format!("missing '{punct}' at '<EOF>'"),
            Some(other) => format!("mismatched input {other} expecting '{punct}'"),
        })
    }

    fn expr(&mut self) -> Parsed {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("expression nested deeper than {MAX_DEPTH}"));
        }
        let condition = self.binary(0)?;
        let expr = if self.eat("?") {
            let then = self.binary(0)?;
            self.expect(":")?;
            let otherwise = self.expr()?;
            Expr::call("_?_:_", vec![condition, then, otherwise])
        } else {
            condition
        };
        self.depth -= 1;
        Ok(expr)
    }

    /// Binary operators of precedence `level` and above, left-associative.
    fn binary(&mut self, level: usize) -> Parsed {
        const LEVELS: [&[&str]; 5] = [
            &["||"],
            &["&&"],
            &["==", "!=", "<", "<=", ">", ">=", "in"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        let Some(operators) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.binary(level + 1)?;
        while let Some(Token::Punct(p)) = self.peek()
            && operators.contains(p)
        {
            let function = if *p == "in" {
                "@in".to_owned()
            } else {
                format!("_{p}_")
            };
            self.at += 1;
            let right = self.binary(level + 1)?;
            left = Expr::Call {
                function,
                args: vec![left, right],
            };
        }
        Ok(left)
    }

    fn unary(&mut self) -> Parsed {
        for op in ["!", "-"] {
            if self.eat(op) {
                // CEL reads a negative number as a literal.
                if op == "-"
                    && let Some(Token::Literal(literal @ (Literal::Int | Literal::Double))) =
                        self.peek().cloned()
                {
                    self.at += 1;
                    return self.member(Expr::Literal(literal));
                }
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(format!("expression nested deeper than {MAX_DEPTH}"));
                }
                let operand = self.unary()?;
                self.depth -= 1;
                return Ok(Expr::call(&format!("{op}_"), vec![operand]));
            }
        }
        let primary = self.primary()?;
        self.member(primary)
    }

    /// `.field`, `.method(args)` and `[index]` after an operand.
    fn member(&mut self, mut operand: Expr) -> Parsed {
        loop {
            if self.eat(".") {
                let Some(Token::Ident(name)) = self.peek().cloned() else {
                    return Err(self.mismatched("IDENTIFIER"));
                };
                self.at += 1;
                operand = if self.eat("(") {
                    Expr::call(&name, self.arguments(")")?)
                } else {
                    Expr::Select(Box::new(operand), name)
                };
            } else if self.eat("[") {
                let index = self.expr()?;
                self.expect("]")?;
                operand = Expr::call("_[_]", vec![operand, index]);
            } else {
                return Ok(operand);
            }
        }
    }

    fn primary(&mut self) -> Parsed {
        let dot = self.eat(".");
        match self.peek().cloned() {
            Some(Token::Ident(name)) => {
                self.at += 1;
                let name = if dot { format!(".{name}") } else { name };
                if self.eat("(") {
                    return Ok(Expr::call(&name, self.arguments(")")?));
                }
                Ok(Expr::Ident(name))
            }
            _ if dot => Err(self.mismatched("IDENTIFIER")),
            Some(Token::Literal(literal)) => {
                self.at += 1;
                Ok(Expr::Literal(literal))
            }
            Some(Token::Punct("(")) => {
                self.at += 1;
                let inner = self.expr()?;
                self.expect(")")?;
                Ok(inner)
            }
            Some(Token::Punct("[")) => {
                self.at += 1;
                self.arguments("]")?;
                Ok(Expr::List)
            }
            Some(Token::Punct("{")) => {
                self.at += 1;
                while !self.eat("}") {
                    self.expr()?;
                    self.expect(":")?;
                    self.expr()?;
                    if !self.eat(",") {
                        self.expect("}")?;
                        break;
                    }
                }
                Ok(Expr::Map)
            }
            _ => Err(self.mismatched(
                "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, \
                 NUM_UINT, STRING, BYTES, IDENTIFIER}",
            )),
        }
    }

    /// Comma-separated expressions up to `close` (a trailing comma allowed).
    fn arguments(&mut self, close: &str) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        while !self.eat(close) {
            args.push(self.expr()?);
            if !self.eat(",") {
                self.expect(close)?;
                break;
            }
        }
        Ok(args)
    }

    fn mismatched(&self, expecting: &str) -> String {
        match self.peek() {
            None => format!("mismatched input '<EOF>' expecting {expecting}"),
            Some(other) => format!("mismatched input {other} expecting {expecting}"),
        }
    }
}
