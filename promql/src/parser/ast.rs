//! The syntax tree of a parsed query.
//!
//! Every node records the byte offset where it starts in the query text (`start`), because
//! Prometheus reports warnings and infos with the `line:column` of the sub-expression they are
//! about. Duration-valued parts (`[5m]`, `offset 1h`, `[step()*2]`) are kept as
//! [`DurationExpr`] and resolved when the query runs, since `step()` and `range()` depend on the
//! query's parameters.

use std::fmt;

use storage::Matcher;

/// Byte offset into the query text.
pub type Pos = usize;

/// The four PromQL value types (plus `None` for malformed nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// Not a valid expression type.
    None,
    /// A single number per evaluation step.
    Scalar,
    /// An instant vector.
    Vector,
    /// A range vector.
    Matrix,
    /// A string.
    String,
}

impl ValueType {
    /// The name Prometheus uses in messages ("instant vector", "range vector", ...).
    pub fn documented(self) -> &'static str {
        match self {
            ValueType::None => "none",
            ValueType::Scalar => "scalar",
            ValueType::Vector => "instant vector",
            ValueType::Matrix => "range vector",
            ValueType::String => "string",
        }
    }

    /// The short name used in a few error messages ("vector", "matrix").
    pub fn short(self) -> &'static str {
        match self {
            ValueType::None => "none",
            ValueType::Scalar => "scalar",
            ValueType::Vector => "vector",
            ValueType::Matrix => "matrix",
            ValueType::String => "string",
        }
    }
}

/// A PromQL expression.
#[derive(Debug, Clone)]
pub enum Expr {
    /// `1.5`, `Inf`, `5m` (a duration literal at expression level is a number of seconds).
    Number(NumberLiteral),
    /// `"text"`.
    String(StringLiteral),
    /// `metric{label="value"} offset 5m @ 100`.
    Vector(Box<VectorSelector>),
    /// `metric{...}[5m]`.
    Matrix(Box<MatrixSelector>),
    /// `expr[30m:1m]`.
    Subquery(Box<Subquery>),
    /// `(expr)`.
    Paren(Box<ParenExpr>),
    /// `-expr` or `+expr`.
    Unary(Box<UnaryExpr>),
    /// `lhs op lhs`.
    Binary(Box<BinaryExpr>),
    /// `sum by (x) (expr)`.
    Aggregate(Box<AggregateExpr>),
    /// `rate(expr)`.
    Call(Box<Call>),
}

/// A number literal.
#[derive(Debug, Clone)]
pub struct NumberLiteral {
    /// The value (a folded unary minus included).
    pub value: f64,
    /// Start of the literal (or of its sign).
    pub start: Pos,
}

/// A string literal.
#[derive(Debug, Clone)]
pub struct StringLiteral {
    /// The decoded text.
    pub value: String,
    /// False if escapes produced invalid UTF-8 (see [`super::strings`]).
    pub valid_utf8: bool,
    /// The literal as written, quotes included (used in error messages).
    pub raw: String,
    /// Start of the literal.
    pub start: Pos,
}

/// The `@` modifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtModifier {
    /// `@ <unix seconds>`, stored in milliseconds.
    Timestamp(i64),
    /// `@ start()`: the query's start time.
    Start,
    /// `@ end()`: the query's end time.
    End,
}

/// An instant vector selector.
#[derive(Debug, Clone)]
pub struct VectorSelector {
    /// The metric name if written outside the braces.
    pub name: Option<String>,
    /// All matchers; includes `__name__="<name>"` when `name` is set.
    pub matchers: Vec<Matcher>,
    /// `offset <duration>`; positive looks back in time.
    pub offset: Option<DurationExpr>,
    /// `@ <time>`.
    pub at: Option<AtModifier>,
    /// `anchored` modifier (extended range selectors).
    pub anchored: bool,
    /// `smoothed` modifier (extended range selectors).
    pub smoothed: bool,
    /// Set for the label-selector argument of `info()`, which may match the empty string.
    pub bypass_empty_matcher_check: bool,
    /// Start of the selector.
    pub start: Pos,
}

/// A range vector selector `selector[range]`.
#[derive(Debug, Clone)]
pub struct MatrixSelector {
    /// The selector; its offset, `@`, `anchored` and `smoothed` apply to the range.
    pub vs: VectorSelector,
    /// The range.
    pub range: DurationExpr,
}

/// A subquery `expr[range:step]`.
#[derive(Debug, Clone)]
pub struct Subquery {
    /// The inner expression (an instant vector).
    pub expr: Expr,
    /// The range.
    pub range: DurationExpr,
    /// The resolution; `None` means the engine's default subquery step.
    pub step: Option<DurationExpr>,
    /// `offset <duration>`.
    pub offset: Option<DurationExpr>,
    /// `@ <time>`.
    pub at: Option<AtModifier>,
}

/// `(expr)`.
#[derive(Debug, Clone)]
pub struct ParenExpr {
    /// The inner expression.
    pub expr: Expr,
    /// Position of `(`.
    pub start: Pos,
}

/// `-expr` / `+expr` on something that is not a number literal.
#[derive(Debug, Clone)]
pub struct UnaryExpr {
    /// True for `-`.
    pub negate: bool,
    /// The operand.
    pub expr: Expr,
    /// Position of the sign.
    pub start: Pos,
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `^`
    Pow,
    /// `atan2`
    Atan2,
    /// `==`
    Eql,
    /// `!=`
    Neq,
    /// `>`
    Gtr,
    /// `<`
    Lss,
    /// `>=`
    Gte,
    /// `<=`
    Lte,
    /// `and`
    And,
    /// `or`
    Or,
    /// `unless`
    Unless,
    /// `</`: trims a native histogram to its observations at or below the right-hand value.
    TrimUpper,
    /// `>/`: trims a native histogram to its observations at or above the right-hand value.
    TrimLower,
}

impl BinOp {
    /// True for `== != > < >= <=`.
    pub fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eql | BinOp::Neq | BinOp::Gtr | BinOp::Lss | BinOp::Gte | BinOp::Lte)
    }

    /// True for `and or unless`.
    pub fn is_set(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or | BinOp::Unless)
    }

    /// Arithmetic operators change what a metric means, so their results lose the metric name.
    pub fn changes_metric_schema(self) -> bool {
        matches!(
            self,
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Pow | BinOp::Mod | BinOp::Atan2
        )
    }

    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "^",
            BinOp::Atan2 => "atan2",
            BinOp::Eql => "==",
            BinOp::Neq => "!=",
            BinOp::Gtr => ">",
            BinOp::Lss => "<",
            BinOp::Gte => ">=",
            BinOp::Lte => "<=",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Unless => "unless",
            BinOp::TrimUpper => "</",
            BinOp::TrimLower => ">/",
        }
    }
}

/// Cardinality of vector matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cardinality {
    /// Default for arithmetic and comparison.
    OneToOne,
    /// `group_left`.
    ManyToOne,
    /// `group_right`.
    OneToMany,
    /// Set operators.
    ManyToMany,
}

/// How the two sides of a vector/vector operation are matched.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorMatching {
    /// Cardinality.
    pub card: Cardinality,
    /// True for `on(...)`, false for `ignoring(...)` or no clause.
    pub on: bool,
    /// Labels of the `on`/`ignoring` clause.
    pub labels: Vec<String>,
    /// Labels of `group_left(...)` / `group_right(...)` copied from the "one" side.
    pub include: Vec<String>,
    /// `fill_left(v)`: value used when the left side has no match.
    pub fill_lhs: Option<f64>,
    /// `fill_right(v)`: value used when the right side has no match.
    pub fill_rhs: Option<f64>,
}

impl VectorMatching {
    /// The matching of a vector/vector operation without a clause: one-to-one on all labels.
    pub fn one_to_one() -> VectorMatching {
        VectorMatching {
            card: Cardinality::OneToOne,
            on: false,
            labels: Vec::new(),
            include: Vec::new(),
            fill_lhs: None,
            fill_rhs: None,
        }
    }
}

/// A binary operation.
#[derive(Debug, Clone)]
pub struct BinaryExpr {
    /// Operator.
    pub op: BinOp,
    /// Left operand.
    pub lhs: Expr,
    /// Right operand.
    pub rhs: Expr,
    /// `bool` modifier on a comparison.
    pub return_bool: bool,
    /// Matching for vector/vector operations; `None` when a side is a scalar.
    pub matching: Option<VectorMatching>,
}

/// Aggregation operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggOp {
    /// `sum`
    Sum,
    /// `avg`
    Avg,
    /// `count`
    Count,
    /// `min`
    Min,
    /// `max`
    Max,
    /// `group`
    Group,
    /// `stddev`
    Stddev,
    /// `stdvar`
    Stdvar,
    /// `topk`
    Topk,
    /// `bottomk`
    Bottomk,
    /// `count_values`
    CountValues,
    /// `quantile`
    Quantile,
    /// `limitk`
    Limitk,
    /// `limit_ratio`
    LimitRatio,
}

impl AggOp {
    /// The operator's name.
    pub fn as_str(self) -> &'static str {
        match self {
            AggOp::Sum => "sum",
            AggOp::Avg => "avg",
            AggOp::Count => "count",
            AggOp::Min => "min",
            AggOp::Max => "max",
            AggOp::Group => "group",
            AggOp::Stddev => "stddev",
            AggOp::Stdvar => "stdvar",
            AggOp::Topk => "topk",
            AggOp::Bottomk => "bottomk",
            AggOp::CountValues => "count_values",
            AggOp::Quantile => "quantile",
            AggOp::Limitk => "limitk",
            AggOp::LimitRatio => "limit_ratio",
        }
    }

    /// Operators that take a parameter before the vector.
    pub fn has_param(self) -> bool {
        matches!(
            self,
            AggOp::Topk
                | AggOp::Bottomk
                | AggOp::CountValues
                | AggOp::Quantile
                | AggOp::Limitk
                | AggOp::LimitRatio
        )
    }

    /// Operators behind the experimental-functions flag.
    pub fn is_experimental(self) -> bool {
        matches!(self, AggOp::Limitk | AggOp::LimitRatio)
    }
}

/// An aggregation.
#[derive(Debug, Clone)]
pub struct AggregateExpr {
    /// Operator.
    pub op: AggOp,
    /// The aggregated vector.
    pub expr: Expr,
    /// `k`, `q`, ratio or label name.
    pub param: Option<Expr>,
    /// `by`/`without` labels.
    pub grouping: Vec<String>,
    /// True for `without`.
    pub without: bool,
    /// Position of the operator keyword.
    pub start: Pos,
}

/// The signature of a PromQL function (the table of all of them is [`super::functions`]).
#[derive(Debug, PartialEq, Eq)]
pub struct FunctionSpec {
    /// Name as written in queries.
    pub name: &'static str,
    /// Argument types; with `variadic != 0` the last type repeats.
    pub args: &'static [ValueType],
    /// 0: exactly `args.len()` arguments; n > 0: the last argument may repeat up to n times more
    /// (or be left out); -1: the last argument may repeat without limit.
    pub variadic: i32,
    /// Result type.
    pub ret: ValueType,
    /// Needs the experimental-functions feature flag.
    pub experimental: bool,
}

/// A function call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The function.
    pub func: &'static FunctionSpec,
    /// Arguments.
    pub args: Vec<Expr>,
    /// Position of the function name.
    pub start: Pos,
}

/// A duration-valued expression: a literal or (with the duration-expressions feature)
/// arithmetic over literals, `step()` and `range()`.
#[derive(Debug, Clone, PartialEq)]
pub enum DurationExpr {
    /// A number of seconds (`5m` is 300).
    Literal(f64),
    /// `step()`: the query step in seconds (0 for instant queries).
    Step,
    /// `range()`: end minus start of the query in seconds.
    Range,
    /// Unary minus.
    Neg(Box<DurationExpr>),
    /// Arithmetic.
    Binary(DurationOp, Box<DurationExpr>, Box<DurationExpr>),
}

/// Operators inside duration expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `^`
    Pow,
    /// `min_of(a, b)`
    Min,
    /// `max_of(a, b)`
    Max,
}

impl DurationExpr {
    /// True for a plain literal (no feature flag needed).
    pub fn is_literal(&self) -> bool {
        matches!(self, DurationExpr::Literal(_))
    }
}

impl Expr {
    /// The value type this expression evaluates to.
    pub fn value_type(&self) -> ValueType {
        match self {
            Expr::Number(_) => ValueType::Scalar,
            Expr::String(_) => ValueType::String,
            Expr::Vector(_) => ValueType::Vector,
            Expr::Matrix(_) | Expr::Subquery(_) => ValueType::Matrix,
            Expr::Paren(p) => p.expr.value_type(),
            Expr::Unary(u) => u.expr.value_type(),
            Expr::Binary(b) => {
                if b.lhs.value_type() == ValueType::Scalar && b.rhs.value_type() == ValueType::Scalar {
                    ValueType::Scalar
                } else {
                    ValueType::Vector
                }
            }
            Expr::Aggregate(_) => ValueType::Vector,
            Expr::Call(c) => c.func.ret,
        }
    }

    /// Byte offset where the expression starts.
    pub fn start(&self) -> Pos {
        match self {
            Expr::Number(n) => n.start,
            Expr::String(s) => s.start,
            Expr::Vector(v) => v.start,
            Expr::Matrix(m) => m.vs.start,
            Expr::Subquery(s) => s.expr.start(),
            Expr::Paren(p) => p.start,
            Expr::Unary(u) => u.start,
            Expr::Binary(b) => b.lhs.start(),
            Expr::Aggregate(a) => a.start,
            Expr::Call(c) => c.start,
        }
    }

    /// Heap bytes of the compiled regexes this tree's matchers hold: a cache that keeps trees
    /// counts them (one regex may need megabytes). Walks with its own stack, not recursion.
    pub fn regex_bytes(&self) -> usize {
        let selector_bytes =
            |vs: &VectorSelector| vs.matchers.iter().map(Matcher::regex_bytes).sum::<usize>();
        let mut total = 0;
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Number(_) | Expr::String(_) => {}
                Expr::Vector(v) => total += selector_bytes(v),
                Expr::Matrix(m) => total += selector_bytes(&m.vs),
                Expr::Subquery(s) => stack.push(&s.expr),
                Expr::Paren(p) => stack.push(&p.expr),
                Expr::Unary(u) => stack.push(&u.expr),
                Expr::Binary(b) => stack.extend([&b.lhs, &b.rhs]),
                Expr::Aggregate(a) => stack.extend(std::iter::once(&a.expr).chain(&a.param)),
                Expr::Call(c) => stack.extend(&c.args),
            }
        }
        total
    }

    /// The expression with any number of enclosing parentheses removed.
    pub fn unparen(&self) -> &Expr {
        let mut e = self;
        while let Expr::Paren(p) = e {
            e = &p.expr;
        }
        e
    }

    /// [`Expr::unparen`] by value: the parentheses are dropped and the rest moved, not copied
    /// (the parser strips them from every function argument).
    pub fn into_unparen(self) -> Expr {
        let mut e = self;
        while let Expr::Paren(p) = e {
            e = p.expr;
        }
        e
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.documented())
    }
}
