/// The twelve Coaty core types (protocol version 3): the shapes every object type is based on.
///
/// The raw value is the wire string of the object's `coreType` field; ``objectType`` is the
/// object type of the core type itself (`coaty.<CoreType>`).
public enum CoreType: String, Sendable, Hashable, CaseIterable, Codable {
    /// The base shape every object has.
    case coatyObject = "CoatyObject"
    /// A user (SCIM 2).
    case user = "User"
    /// An annotation (text, image, media…).
    case annotation = "Annotation"
    /// A task or task request.
    case task = "Task"
    /// The context of IO routing.
    case ioContext = "IoContext"
    /// An IO node with IO sources and actors.
    case ioNode = "IoNode"
    /// A source of IO values.
    case ioSource = "IoSource"
    /// A consumer of IO values.
    case ioActor = "IoActor"
    /// The identity of an agent.
    case identity = "Identity"
    /// A log record.
    case log = "Log"
    /// A geographic location.
    case location = "Location"
    /// A snapshot of another object in time.
    case snapshot = "Snapshot"

    /// The object type of this core type: `coaty.<CoreType>`.
    public var objectType: String {
        switch self {
        case .coatyObject: "coaty.CoatyObject"
        case .user: "coaty.User"
        case .annotation: "coaty.Annotation"
        case .task: "coaty.Task"
        case .ioContext: "coaty.IoContext"
        case .ioNode: "coaty.IoNode"
        case .ioSource: "coaty.IoSource"
        case .ioActor: "coaty.IoActor"
        case .identity: "coaty.Identity"
        case .log: "coaty.Log"
        case .location: "coaty.Location"
        case .snapshot: "coaty.Snapshot"
        }
    }

    /// The core type whose own object type is `objectType`, if any.
    /// - Parameter objectType: an object type such as `coaty.Task`.
    public init?(objectType: String) {
        guard objectType.hasPrefix("coaty."), let match = CoreType(rawValue: String(objectType.dropFirst(6))) else {
            return nil
        }
        self = match
    }

    /// The Swift type CoatyKit decodes objects of this core type into when no registered type matches.
    public var coreObjectType: any CoatyObject.Type {
        switch self {
        case .coatyObject: BaseObject.self
        case .user: User.self
        case .annotation: Annotation.self
        case .task: CoatyTask.self
        case .ioContext: IoContext.self
        case .ioNode: IoNode.self
        case .ioSource: IoSource.self
        case .ioActor: IoActor.self
        case .identity: Identity.self
        case .log: Log.self
        case .location: Location.self
        case .snapshot: Snapshot.self
        }
    }
}
