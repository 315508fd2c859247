//! Which namespaces an operator serves: `-A`, or Kopf's namespace patterns (KOPF.md §10.2).

use std::collections::BTreeSet;

use kube::Client;
use kube::api::Api;

/// The namespaces an operator serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `-A/--all-namespaces`: one cluster-wide stream per resource.
    Cluster,
    /// `-n PATTERN...`: one stream per resource and matching namespace.
    Namespaces(Vec<Pattern>),
}

impl Scope {
    /// Builds the scope from `-n` values; an empty list means cluster-wide.
    pub(crate) fn from_patterns<S: AsRef<str>>(patterns: &[S]) -> Scope {
        if patterns.is_empty() {
            Scope::Cluster
        } else {
            Scope::Namespaces(
                patterns
                    .iter()
                    .map(|p| Pattern::parse(p.as_ref()))
                    .collect(),
            )
        }
    }

    /// Whether a namespace is served (always true cluster-wide).
    pub(crate) fn includes(&self, namespace: &str) -> bool {
        match self {
            Scope::Cluster => true,
            Scope::Namespaces(patterns) => patterns.iter().any(|p| p.matches(namespace)),
        }
    }

    /// The namespaces named literally, when every pattern is a plain name: then
    /// no namespace listing (and no permission for it) is needed.
    pub(crate) fn plain_names(&self) -> Option<Vec<String>> {
        match self {
            Scope::Cluster => None,
            Scope::Namespaces(patterns) => patterns
                .iter()
                .map(Pattern::plain_name)
                .collect::<Option<Vec<_>>>(),
        }
    }
}

impl Scope {
    /// The plainly named namespaces of the patterns, assumed to exist, and how many
    /// patterns are not plain names (Kopf serves only those when it may not list
    /// namespaces).
    pub(crate) fn plain_names_only(&self) -> (BTreeSet<String>, usize) {
        match self {
            Scope::Cluster => (BTreeSet::new(), 0),
            Scope::Namespaces(patterns) => {
                let names: BTreeSet<String> =
                    patterns.iter().filter_map(Pattern::plain_name).collect();
                let others = patterns.iter().filter(|p| p.plain_name().is_none()).count();
                (names, others)
            }
        }
    }
}

/// The namespaces a scope serves now (none for cluster-wide).
pub(crate) async fn served_namespaces(
    client: &Client,
    scope: &Scope,
) -> Result<BTreeSet<String>, kube::Error> {
    match scope {
        Scope::Cluster => Ok(BTreeSet::new()),
        Scope::Namespaces(_) => {
            if let Some(names) = scope.plain_names() {
                return Ok(names.into_iter().collect());
            }
            let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let list = api.list(&Default::default()).await?;
            Ok(list
                .items
                .into_iter()
                .filter_map(|ns| ns.metadata.name)
                .filter(|name| scope.includes(name))
                .collect())
        }
    }
}

/// One `-n` value: comma-separated globs, `!` negates (KOPF.md §10.2).
///
/// The first glob decides inclusion (a leading negation implies a preceding
/// `*`); later negations exclude; later positive globs re-include only what the
/// first glob matched. So `myapp-*,!*-pr-*,*-pr-123` matches `myapp-live` and
/// `myapp-pr-123`, but neither `myapp-pr-456` nor `otherapp-pr-123`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    globs: Vec<(bool, String)>,
}

impl Pattern {
    pub(crate) fn parse(text: &str) -> Pattern {
        let globs = text
            .split(',')
            .map(|part| {
                part.chars()
                    .filter(|c| !c.is_whitespace())
                    .collect::<String>()
            })
            .filter(|part| !part.is_empty())
            .map(|part| match part.strip_prefix('!') {
                Some(rest) => (false, rest.to_owned()),
                None => (true, part),
            })
            .collect();
        Pattern { globs }
    }

    pub(crate) fn matches(&self, namespace: &str) -> bool {
        let Some((first_positive, first_glob)) = self.globs.first() else {
            return false;
        };
        let base = if *first_positive {
            glob_match(first_glob, namespace)
        } else {
            true
        };
        if !base {
            return false;
        }
        let mut included = *first_positive || !glob_match(first_glob, namespace);
        for (positive, glob) in &self.globs[1..] {
            if glob_match(glob, namespace) {
                included = *positive;
            }
        }
        included
    }

    fn plain_name(&self) -> Option<String> {
        match self.globs.as_slice() {
            [(true, name)] if !name.contains(['*', '?']) => Some(name.clone()),
            _ => None,
        }
    }
}

/// Shell-style glob with `*` and `?`, over the whole text.
fn glob_match(glob: &str, text: &str) -> bool {
    let (g, t): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    let (mut gi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == t[ti]) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == '*' {
            backtrack = Some((gi, ti));
            gi += 1;
        } else if let Some((star, matched)) = backtrack {
            gi = star + 1;
            ti = matched + 1;
            backtrack = Some((star, matched + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kopf_documented_example() {
        let p = Pattern::parse("myapp-*,!*-pr-*,*-pr-123");
        assert!(p.matches("myapp-live"));
        assert!(p.matches("myapp-pr-123"));
        assert!(!p.matches("myapp-pr-456"));
        assert!(!p.matches("otherapp-pr-123"));
    }

    #[test]
    fn leading_negation_implies_everything_else() {
        let p = Pattern::parse("!kube-*");
        assert!(p.matches("default"));
        assert!(!p.matches("kube-system"));
    }

    #[test]
    fn spaces_are_ignored_and_question_marks_match_one() {
        let p = Pattern::parse(" ns-? , !ns-x ");
        assert!(p.matches("ns-a"));
        assert!(!p.matches("ns-x"));
        assert!(!p.matches("ns-ab"));
    }

    #[test]
    fn plain_names_need_no_listing() {
        let s = Scope::from_patterns(&["default", "other"]);
        assert_eq!(
            s.plain_names(),
            Some(vec!["default".into(), "other".into()])
        );
        assert_eq!(Scope::from_patterns(&["ns-*"]).plain_names(), None);
        assert!(Scope::from_patterns::<&str>(&[]).includes("anything"));
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "aXbYc"));
        assert!(!glob_match("a*b", "aXbY"));
        assert!(glob_match("**a", "a"));
    }
}
