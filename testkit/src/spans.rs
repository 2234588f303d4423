//! Captures the fields of tracing spans (to check what `llm-retry` and the providers report).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The fields of one span, by name, as text.
pub type Fields = BTreeMap<String, String>;

/// A captured span: its id while it is open, and its fields.
type Captured = (Option<Id>, Fields);

/// Every span named `name` created while the guard lives, with its fields (recorded at creation
/// or later).
#[derive(Clone, Default)]
pub struct Spans {
    name: &'static str,
    spans: Arc<Mutex<Vec<Captured>>>,
}

impl Spans {
    /// Captures the spans named `name` on this thread until the guard is dropped.
    pub fn capture(name: &'static str) -> (Self, tracing::subscriber::DefaultGuard) {
        let spans = Spans { name, spans: Arc::default() };
        let subscriber = tracing_subscriber::registry().with(spans.clone());
        (spans, tracing::subscriber::set_default(subscriber))
    }

    /// The captured spans' fields, in creation order.
    pub fn fields(&self) -> Vec<Fields> {
        self.spans.lock().unwrap().iter().map(|(_, f)| f.clone()).collect()
    }
}

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == self.name {
            let mut fields = Fields::new();
            attrs.record(&mut Visitor(&mut fields));
            self.spans.lock().unwrap().push((Some(id.clone()), fields));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some((_, fields)) = spans.iter_mut().find(|(span, _)| span.as_ref() == Some(id)) {
            values.record(&mut Visitor(fields));
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        // Ids are reused once a span closed: forget it so a later span cannot be mistaken for it.
        let mut spans = self.spans.lock().unwrap();
        if let Some((span, _)) = spans.iter_mut().find(|(span, _)| span.as_ref() == Some(&id)) {
            *span = None;
        }
    }
}
