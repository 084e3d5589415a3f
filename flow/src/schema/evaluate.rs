//! Evaluation: an instance against a compiled graph, charging the normative
//! work meter and reporting exhaustion before invalidity.

use std::collections::HashMap;
use std::sync::Arc;

use super::{
    child_pointer, escape_pointer_token, Diagnostic, Graph, Keywords, NodeId, NodeKind, WORK_BUDGET,
};
use crate::json;
use crate::json::number_value;
use crate::json::Value;

pub(super) struct Exhausted;

type Outcome = Option<Arc<Diagnostic>>;

/// Identity of an instance location: the address of its value node, which
/// is unique per instance pointer for the duration of one validation.
type InstanceId = usize;

pub(super) fn instance_id(v: &Value) -> InstanceId {
    v as *const Value as usize
}

/// One step of the explicit evaluation stack. Evaluation is iterative so
/// that a long acyclic `$ref` chain cannot exhaust a small thread stack.
pub(super) enum Step<'v> {
    /// Charge and schedule a (schema, instance) pair unless memoized.
    Visit(NodeId, &'v Value),
    /// All scheduled children are done; `branch_done` says whether the
    /// `then`/`else` branch of an `if` has been scheduled already.
    Finish(NodeId, &'v Value, bool),
}

pub(super) struct Evaluator<'g> {
    pub(super) graph: &'g Graph,
    pub(super) units: u64,
    /// (schema node, instance node) -> first failure, once finished.
    pub(super) memo: HashMap<(NodeId, InstanceId), Outcome>,
    /// Instance node -> (parent instance node, reference token).
    pub(super) locations: HashMap<InstanceId, (InstanceId, String)>,
}

impl<'g> Evaluator<'g> {
    pub(super) fn charge(&mut self, units: u64) -> Result<(), Exhausted> {
        self.units += units;
        if self.units > WORK_BUDGET {
            Err(Exhausted)
        } else {
            Ok(())
        }
    }

    pub(super) fn keywords(&self, node: NodeId) -> Option<&'g Keywords> {
        match &self.graph.nodes[node].kind {
            NodeKind::Object(k) => Some(k),
            NodeKind::Bool(_) => None,
        }
    }

    pub(super) fn instance_pointer(&self, mut id: InstanceId) -> String {
        let mut tokens = Vec::new();
        while let Some((parent, token)) = self.locations.get(&id) {
            tokens.push(token.as_str());
            id = *parent;
        }
        tokens
            .iter()
            .rev()
            .map(|t| format!("/{}", escape_pointer_token(t)))
            .collect()
    }

    pub(super) fn fail(
        &self,
        node: NodeId,
        inst: &Value,
        keyword: Option<&'static str>,
    ) -> Outcome {
        let base = &self.graph.nodes[node].pointer;
        let schema_pointer = match keyword {
            Some(k) => child_pointer(base, k),
            None => base.clone(),
        };
        Some(Arc::new(Diagnostic {
            instance_pointer: self.instance_pointer(instance_id(inst)),
            schema_pointer,
            keyword,
            // Worded once, for the diagnostic returned (`explain`).
            message: String::new(),
        }))
    }

    pub(super) fn result(&self, node: NodeId, inst: &Value) -> &Outcome {
        &self.memo[&(node, instance_id(inst))]
    }

    pub(super) fn locate(&mut self, parent: &Value, child: &Value, token: impl FnOnce() -> String) {
        self.locations
            .entry(instance_id(child))
            .or_insert_with(|| (instance_id(parent), token()));
    }

    pub(super) fn run(&mut self, root: NodeId, instance: &Value) -> Result<Outcome, Exhausted> {
        let mut stack = vec![Step::Visit(root, instance)];
        while let Some(step) = stack.pop() {
            match step {
                Step::Visit(node, inst) => {
                    if self.memo.contains_key(&(node, instance_id(inst))) {
                        continue;
                    }
                    self.charge(1)?;
                    match self.keywords(node) {
                        None => {
                            let outcome = match self.graph.nodes[node].kind {
                                NodeKind::Bool(false) => self.fail(node, inst, None),
                                _ => None,
                            };
                            self.memo.insert((node, instance_id(inst)), outcome);
                        }
                        Some(k) => {
                            stack.push(Step::Finish(node, inst, false));
                            self.schedule(k, inst, &mut stack)?;
                        }
                    }
                }
                Step::Finish(node, inst, branch_done) => {
                    let k = self.keywords(node).expect("object schema");
                    if !branch_done {
                        if let Some(condition) = k.if_ {
                            let holds = self.result(condition, inst).is_none();
                            if let Some(branch) = if holds { k.then_ } else { k.else_ } {
                                self.charge(1)?;
                                stack.push(Step::Finish(node, inst, true));
                                stack.push(Step::Visit(branch, inst));
                                continue;
                            }
                        }
                    }
                    let outcome = self.conclude(node, k, inst);
                    self.memo.insert((node, instance_id(inst)), outcome);
                }
            }
        }
        Ok(self.result(root, instance).clone())
    }

    /// Charges every applicable keyword of one schema object and schedules
    /// its child evaluations. Nothing short-circuits, so the total charge is
    /// the normative one whatever the order.
    pub(super) fn schedule<'v>(
        &mut self,
        k: &'g Keywords,
        inst: &'v Value,
        stack: &mut Vec<Step<'v>>,
    ) -> Result<(), Exhausted> {
        let visit = |stack: &mut Vec<Step<'v>>, node: NodeId, v: &'v Value| {
            stack.push(Step::Visit(node, v));
        };
        if let Some(target) = k.reference {
            self.charge(1)?;
            visit(stack, target, inst);
        }
        if let Some(types) = &k.types {
            self.charge(types.len() as u64)?;
        }
        if k.constant.is_some() {
            self.charge(1)?;
        }
        if let Some(members) = &k.enumeration {
            self.charge(members.len() as u64)?;
        }
        for branches in [&k.all_of, &k.any_of, &k.one_of].into_iter().flatten() {
            self.charge(branches.len() as u64)?;
            for &b in branches {
                visit(stack, b, inst);
            }
        }
        if let Some(child) = k.not {
            self.charge(1)?;
            visit(stack, child, inst);
        }
        if let Some(condition) = k.if_ {
            self.charge(1)?;
            visit(stack, condition, inst);
        }
        match inst {
            Value::Object(members) => {
                if let Some(properties) = &k.properties {
                    self.charge(properties.len() as u64)?;
                    for (name, child) in properties {
                        if let Some(v) = members.get(name) {
                            self.locate(inst, v, || name.clone());
                            visit(stack, *child, v);
                        }
                    }
                }
                if let Some(names) = &k.required {
                    self.charge(names.len() as u64)?;
                }
                if let Some(child) = k.additional_properties {
                    self.charge(members.len() as u64)?;
                    for (name, v) in members {
                        if !declared(k, name) {
                            self.locate(inst, v, || name.clone());
                            visit(stack, child, v);
                        }
                    }
                }
                self.charge(u64::from(k.min_properties.is_some()))?;
                self.charge(u64::from(k.max_properties.is_some()))?;
                if let Some(deps) = &k.dependent_required {
                    self.charge(deps.len() as u64)?;
                    for (trigger, names) in deps {
                        if members.contains_key(trigger) {
                            self.charge(names.len() as u64)?;
                        }
                    }
                }
                if let Some(deps) = &k.dependent_schemas {
                    self.charge(deps.len() as u64)?;
                    for (trigger, child) in deps {
                        if members.contains_key(trigger) {
                            visit(stack, *child, inst);
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(prefix) = &k.prefix_items {
                    self.charge(prefix.len() as u64)?;
                    for (i, (child, item)) in prefix.iter().zip(items).enumerate() {
                        self.locate(inst, item, || i.to_string());
                        visit(stack, *child, item);
                    }
                }
                if let Some(child) = k.items {
                    self.charge(1)?;
                    let skip = k.prefix_items.as_ref().map_or(0, Vec::len);
                    for (i, item) in items.iter().enumerate().skip(skip) {
                        self.locate(inst, item, || i.to_string());
                        visit(stack, child, item);
                    }
                }
                if let Some(child) = k.contains {
                    self.charge(items.len() as u64)?;
                    for (i, item) in items.iter().enumerate() {
                        self.locate(inst, item, || i.to_string());
                        visit(stack, child, item);
                    }
                    self.charge(u64::from(k.min_contains.is_some()))?;
                    self.charge(u64::from(k.max_contains.is_some()))?;
                }
                self.charge(u64::from(k.min_items.is_some()))?;
                self.charge(u64::from(k.max_items.is_some()))?;
            }
            Value::String(s) => {
                if k.min_length.is_some() || k.max_length.is_some() {
                    let bounds =
                        u64::from(k.min_length.is_some()) + u64::from(k.max_length.is_some());
                    self.charge(s.chars().count() as u64 + bounds)?;
                }
            }
            Value::Number(_) => {
                for bound in [
                    k.minimum,
                    k.exclusive_minimum,
                    k.maximum,
                    k.exclusive_maximum,
                ] {
                    self.charge(u64::from(bound.is_some()))?;
                }
            }
            Value::Null | Value::Bool(_) => {}
        }
        Ok(())
    }

    /// Combines finished child results into this pair's outcome: the first
    /// failure in keyword order. Applicators that require their children
    /// pass on the child's own diagnostic.
    pub(super) fn conclude(&self, node: NodeId, k: &Keywords, inst: &Value) -> Outcome {
        let mut first: Outcome = None;
        let note = |failed: bool, keyword: &'static str, first: &mut Outcome| {
            if failed && first.is_none() {
                *first = self.fail(node, inst, Some(keyword));
            }
        };
        let pass_on = |outcome: &Outcome, first: &mut Outcome| {
            if first.is_none() {
                first.clone_from(outcome);
            }
        };
        let ok = |child: NodeId, v: &Value| self.result(child, v).is_none();

        if let Some(target) = k.reference {
            pass_on(self.result(target, inst), &mut first);
        }
        if let Some(types) = &k.types {
            note(!types.iter().any(|t| t.matches(inst)), "type", &mut first);
        }
        if let Some(c) = &k.constant {
            note(!json::equal(c, inst), "const", &mut first);
        }
        if let Some(members) = &k.enumeration {
            note(
                !members.iter().any(|m| json::equal(m, inst)),
                "enum",
                &mut first,
            );
        }
        for &b in k.all_of.iter().flatten() {
            pass_on(self.result(b, inst), &mut first);
        }
        if let Some(branches) = &k.any_of {
            note(!branches.iter().any(|&b| ok(b, inst)), "anyOf", &mut first);
        }
        if let Some(branches) = &k.one_of {
            let passed = branches.iter().filter(|&&b| ok(b, inst)).count();
            note(passed != 1, "oneOf", &mut first);
        }
        if let Some(child) = k.not {
            note(ok(child, inst), "not", &mut first);
        }
        if let Some(condition) = k.if_ {
            let branch = if ok(condition, inst) {
                k.then_
            } else {
                k.else_
            };
            if let Some(branch) = branch {
                pass_on(self.result(branch, inst), &mut first);
            }
        }
        match inst {
            Value::Object(members) => {
                for (name, child) in k.properties.iter().flatten() {
                    if let Some(v) = members.get(name) {
                        pass_on(self.result(*child, v), &mut first);
                    }
                }
                if let Some(names) = &k.required {
                    note(
                        names.iter().any(|n| !members.contains_key(n)),
                        "required",
                        &mut first,
                    );
                }
                if let Some(child) = k.additional_properties {
                    let mut names: Vec<&String> =
                        members.keys().filter(|n| !declared(k, n)).collect();
                    names.sort_by(|a, b| json::compare_utf16(a, b));
                    for name in names {
                        pass_on(self.result(child, &members[name]), &mut first);
                    }
                }
                if let Some(min) = k.min_properties {
                    note((members.len() as u64) < min, "minProperties", &mut first);
                }
                if let Some(max) = k.max_properties {
                    note(members.len() as u64 > max, "maxProperties", &mut first);
                }
                if let Some(deps) = &k.dependent_required {
                    let failed = deps.iter().any(|(trigger, names)| {
                        members.contains_key(trigger)
                            && names.iter().any(|n| !members.contains_key(n))
                    });
                    note(failed, "dependentRequired", &mut first);
                }
                for (trigger, child) in k.dependent_schemas.iter().flatten() {
                    if members.contains_key(trigger) {
                        pass_on(self.result(*child, inst), &mut first);
                    }
                }
            }
            Value::Array(items) => {
                for (child, item) in k.prefix_items.iter().flatten().zip(items) {
                    pass_on(self.result(*child, item), &mut first);
                }
                if let Some(child) = k.items {
                    let skip = k.prefix_items.as_ref().map_or(0, Vec::len);
                    for item in items.iter().skip(skip) {
                        pass_on(self.result(child, item), &mut first);
                    }
                }
                if let Some(child) = k.contains {
                    let matched = items.iter().filter(|item| ok(child, item)).count() as u64;
                    let keyword = if k.min_contains.is_some() {
                        "minContains"
                    } else {
                        "contains"
                    };
                    note(matched < k.min_contains.unwrap_or(1), keyword, &mut first);
                    if let Some(max) = k.max_contains {
                        note(matched > max, "maxContains", &mut first);
                    }
                }
                if let Some(min) = k.min_items {
                    note((items.len() as u64) < min, "minItems", &mut first);
                }
                if let Some(max) = k.max_items {
                    note(items.len() as u64 > max, "maxItems", &mut first);
                }
            }
            Value::String(s) => {
                if k.min_length.is_some() || k.max_length.is_some() {
                    let length = s.chars().count() as u64;
                    if let Some(min) = k.min_length {
                        note(length < min, "minLength", &mut first);
                    }
                    if let Some(max) = k.max_length {
                        note(length > max, "maxLength", &mut first);
                    }
                }
            }
            Value::Number(n) => {
                let x = number_value(n);
                if let Some(m) = k.minimum {
                    note(x < m, "minimum", &mut first);
                }
                if let Some(m) = k.exclusive_minimum {
                    note(x <= m, "exclusiveMinimum", &mut first);
                }
                if let Some(m) = k.maximum {
                    note(x > m, "maximum", &mut first);
                }
                if let Some(m) = k.exclusive_maximum {
                    note(x >= m, "exclusiveMaximum", &mut first);
                }
            }
            Value::Null | Value::Bool(_) => {}
        }
        first
    }
}

/// Whether `properties` declares `name` (binary search in UTF-16 order).
pub(super) fn declared(k: &Keywords, name: &str) -> bool {
    k.properties.as_ref().is_some_and(|p| {
        p.binary_search_by(|(n, _)| json::compare_utf16(n, name))
            .is_ok()
    })
}
