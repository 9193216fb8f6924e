//! Every PRM structure we read or write, each field declared once.
