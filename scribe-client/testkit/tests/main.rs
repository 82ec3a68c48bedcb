//! The testkit's own integration tests: every transport serves, the
//! builders build what they say.

mod it;
