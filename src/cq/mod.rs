//! Completion queues.
