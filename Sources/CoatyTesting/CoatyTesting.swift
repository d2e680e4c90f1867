/// Test support for Coaty agents: an in-process broker and fixtures.
public enum CoatyTesting {}
