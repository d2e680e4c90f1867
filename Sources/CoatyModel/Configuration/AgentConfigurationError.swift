/// A configuration problem, naming where it is: the file and field (`communication.namespace`)
/// or the environment variable (`COATY_NAMESPACE`).
public struct AgentConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file, when the problem is in one.
    public var source: String?
    /// The field path or environment variable, or `nil` for a problem with the whole file.
    public var field: String?
    /// What is wrong and what to do.
    public var reason: String

    /// Creates an error.
    /// - Parameters:
    ///   - source: the file.
    ///   - field: the field path or environment variable.
    ///   - reason: what is wrong.
    public init(source: String? = nil, field: String?, reason: String) {
        self.source = source
        self.field = field
        self.reason = reason
    }

    /// `file: field: reason`, leaving out what is unknown.
    public var description: String {
        [source, field, reason].compactMap { $0 }.joined(separator: ": ")
    }
}
