//! What the next attempt sends: the request (the conversation, or the fresh prompt rebuilt
//! with the prior attempts), the prompt it answers, and its estimated cost.

use super::Engine;
use super::feedback::reply_text;
use crate::chat::{ChatRequest, Message, Role};
use crate::plan::Mode;
use crate::price::{CostEstimate, OutputBasis};
use crate::prompt::{FreshPrompt, Strategy};

impl Engine {
    /// The request for the next attempt, as it would be sent.
    pub fn request(&self) -> ChatRequest {
        let mut messages = Vec::new();
        if let Some(system) = &self.plan.task.system {
            messages.push(Message::system(system.clone()));
        }
        messages.extend(self.plan.task.turns.iter().cloned());
        match self.plan.strategy {
            Strategy::Conversation => messages.extend(self.conversation.iter().cloned()),
            Strategy::Fresh => messages.push(Message::user(self.fresh_prompt())),
        }
        ChatRequest {
            messages,
            temperature: self.temperature,
            max_tokens: self.plan.max_tokens,
            iteration: self.next_iteration(),
            max_iterations: self.limit,
            tool: self.plan.tool.clone(),
            parameters: self.plan.parameters.clone(),
            schema: self
                .narrowed
                .clone()
                .or_else(|| self.plan.schema.clone())
                .filter(|_| self.plan.mode == Mode::Structured && self.plan.tool.is_none()),
        }
    }

    pub(super) fn fresh_prompt(&self) -> String {
        if self.prior.is_empty() {
            return self.first_prompt.clone();
        }
        let ctx = FreshPrompt {
            first: &self.first_prompt,
            attempt: self.next_iteration(),
            max_attempts: self.limit,
            structured: self.plan.mode == Mode::Structured,
            prior: &self.prior,
        };
        let prompt = self.prompts.fresh(&ctx).unwrap_or_else(|e| format!("{}\n\n({e})", self.first_prompt));
        match &self.reply {
            Some(reply) => format!("{prompt}\n\n{}", reply_text(reply)),
            None => prompt,
        }
    }

    /// The last user message of the request being answered (see [`AttemptRecord::prompt`]).
    pub(super) fn sent_prompt(&self) -> String {
        match self.plan.strategy {
            Strategy::Conversation => self
                .conversation
                .iter()
                .rev()
                .find(|m| m.role == Role::User)
                .map(|m| m.content.clone())
                .unwrap_or_default(),
            Strategy::Fresh => self.fresh_prompt(),
        }
    }

    pub(super) fn next_iteration(&self) -> u32 {
        self.history.len() as u32 + 1
    }

    /// The estimated cost of the next attempt: its prompt at ceil(chars/4) tokens, and as
    /// many output tokens as the longest answer so far (before any answer: `max_tokens`,
    /// at most 1024).
    pub fn estimate_next_cost(&self, request: &ChatRequest) -> Option<f64> {
        self.estimate_next(request).map(|e| e.usd)
    }

    /// Like [`Engine::estimate_next_cost`], with how the estimate was made.
    pub fn estimate_next(&self, request: &ChatRequest) -> Option<CostEstimate> {
        let price = self.plan.proposer(self.proposer).1?;
        let (tokens_out, basis) = match self.history.iter().map(|a| a.tokens_out).max() {
            Some(longest) => (longest, OutputBasis::LongestAnswer),
            None => (u64::from(self.plan.max_tokens.unwrap_or(1024).min(1024)), OutputBasis::MaxTokens),
        };
        Some(CostEstimate::new(price, request.chars(), tokens_out, basis))
    }
}
