import CoatyFilter
import CoatyModel

/// An error of the communication manager, saying what to do about it.
public enum CommunicationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A topic part (namespace, channel id, operation, object type, Raw topic) is invalid.
    case invalidTopic(CoatyTopicError)
    /// The event data breaks a protocol rule (e.g. a Discover with neither ids nor types).
    case invalidEventData(CommunicationEventDataError)
    /// An object could not be encoded.
    case encodingFailed(objectType: String, reason: String)
    /// The transport failed permanently (refused connection, unreachable broker).
    case transport(TransportError)
    /// The manager is not started, or was stopped; call `start()` first.
    case notStarted

    /// A message that says what is wrong and what to do.
    public var description: String {
        switch self {
        case .invalidTopic(let error):
            "Invalid topic: \(error). Use non-empty names of the characters [A-Za-z0-9.-_]."
        case .invalidEventData(let error):
            "\(error)"
        case .encodingFailed(let objectType, let reason):
            "An object of type '\(objectType)' could not be encoded: \(reason). Check its Encodable conformance."
        case .transport(let error):
            "\(error)"
        case .notStarted:
            "The communication manager is not started; call start() (or run it as a Service) first."
        }
    }
}

extension CommunicationError {
    /// What a transport call threw, as a communication error: a ``TransportError`` as it is,
    /// anything else as ``TransportError/failed(_:)``.
    static func transportFailure(_ error: any Error) -> CommunicationError {
        .transport(error as? TransportError ?? .failed("\(error)"))
    }
}
