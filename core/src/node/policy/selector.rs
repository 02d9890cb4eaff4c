//! Label selectors (`metav1.LabelSelector`): matchLabels and matchExpressions, all of them
//! required; an empty selector matches everything.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

/// Labels of a pod or a namespace.
pub type Labels = BTreeMap<String, String>;

/// The operator of one requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operator {
    /// The label is one of the values.
    In,
    /// The label is absent or none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the label is compared.
    pub operator: Operator,
    /// The values for `In` and `NotIn`.
    pub values: Vec<String>,
}

/// A parsed label selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    /// Every requirement, matchLabels first (as `In` of one value).
    pub requirements: Vec<Requirement>,
}

impl Selector {
    /// Parses `selector`; `field` names it in an error.
    pub fn parse(selector: &LabelSelector, field: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement {
                key: key.clone(),
                operator: Operator::In,
                values: vec![value.clone()],
            });
        }
        for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
            let at = format!("{field}.matchExpressions[{i}]");
            let operator = match e.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(format!(
                    "{at}.operator: unknown operator {other:?} (In, NotIn, Exists, DoesNotExist)"
                ))
                }
            };
            let values = e.values.clone().unwrap_or_default();
            let needs_values = matches!(operator, Operator::In | Operator::NotIn);
            if needs_values && values.is_empty() {
                return Err(format!(
                    "{at}.values: must be specified when operator is {}",
                    e.operator
                ));
            }
            if !needs_values && !values.is_empty() {
                return Err(format!(
                    "{at}.values: may not be specified when operator is {}",
                    e.operator
                ));
            }
            requirements.push(Requirement {
                key: e.key.clone(),
                operator,
                values,
            });
        }
        Ok(Selector { requirements })
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| {
            let value = labels.get(&r.key);
            match r.operator {
                Operator::In => value.is_some_and(|v| r.values.contains(v)),
                Operator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
            }
        })
    }

    /// Whether it matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Its kubectl-style text (`app=web,tier in (a,b)`; `<all>` when empty).
    pub fn describe(&self) -> String {
        if self.requirements.is_empty() {
            return "<all>".into();
        }
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| match r.operator {
                Operator::In if r.values.len() == 1 => format!("{}={}", r.key, r.values[0]),
                Operator::In => format!("{} in ({})", r.key, r.values.join(",")),
                Operator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Operator::Exists => r.key.clone(),
                Operator::DoesNotExist => format!("!{}", r.key),
            })
            .collect();
        parts.join(",")
    }
}
