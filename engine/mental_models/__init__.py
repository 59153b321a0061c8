"""Mental models: named questions whose answers reflect keeps current, and scheduled reports."""
