"""Direct vs agentic tool-use SFT on TRL."""
