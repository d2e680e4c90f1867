import CoatyFilter
public import CoatyModel

/// A rule of an ``IoRouter``: whether a value-compatible pair of an IoSource and an IoActor of
/// the router's IO context is associated.
///
/// A rule with a `valueType` applies only to pairs whose source has that value type; a rule
/// without one (or with an empty one) is global. For a pair, the rules of its source's value
/// type are tried in order; when there are none, the global rules are (value-type rules take
/// precedence over global rules, as in Coaty JS). The pair is associated when the first of them
/// whose condition holds is found, otherwise it is not (and is disassociated when it was).
///
/// ```swift
/// let sameRoom = IoAssociationRule(name: "same room", valueType: "com.example.Temperature") {
///     candidate in candidate.sourceNode.characteristics?["room"] == candidate.actorNode.characteristics?["room"]
/// }
/// ```
public struct IoAssociationRule: Sendable {
    /// Decides whether a candidate pair is associated. It runs on the router's task; it may read
    /// the router's state (``IoRouter/managedIoNodes``) but must not block.
    public typealias Condition = @Sendable (_ candidate: IoAssociationCandidate) -> Bool

    /// The name of the rule, for logs and display.
    public var name: String
    /// The value type the rule applies to, or `nil` for a global rule.
    public var valueType: String?
    /// The condition.
    public var condition: Condition

    /// Creates a rule.
    /// - Parameters:
    ///   - name: the name, for logs and display.
    ///   - valueType: the value type it applies to; `nil` or empty for a global rule.
    ///   - condition: whether a candidate pair is associated.
    public init(name: String, valueType: String? = nil, condition: @escaping Condition) {
        self.name = name
        self.valueType = valueType.flatMap { $0.isEmpty ? nil : $0 }
        self.condition = condition
    }

    /// The global rule of the basic router: every value-compatible pair is associated.
    public static let anyCompatiblePair = IoAssociationRule(name: "Any association on compatible value types") {
        _ in true
    }
}

/// A value-compatible pair of an IoSource and an IoActor, with their nodes, offered to the
/// conditions of ``IoAssociationRule``s.
public struct IoAssociationCandidate: Sendable {
    /// The IoSource.
    public let source: IoSource
    /// The IoNode that holds the source.
    public let sourceNode: IoNode
    /// The IoActor.
    public let actor: IoActor
    /// The IoNode that holds the actor.
    public let actorNode: IoNode
    /// The router's IO context.
    public let context: IoContext
    /// The router evaluating the rule.
    public let router: IoRouter
}

/// One association held by an ``IoRouter``.
public struct IoAssociation: Sendable, Hashable {
    /// The IoSource.
    public let ioSourceId: CoatyUUID
    /// The IoActor.
    public let ioActorId: CoatyUUID
    /// The route the source publishes its values on.
    public let route: String
    /// The recommended update rate in milliseconds, if any.
    public let updateRate: Double?
}

extension IoRouter {
    /// The Coaty JS compatibility of an IoSource and an IoActor: equal value types, and both
    /// use raw values or both use JSON values.
    /// - Parameters:
    ///   - source: the IoSource.
    ///   - actor: the IoActor.
    /// - Returns: whether they may be associated.
    public static func valueTypesMatch(_ source: IoSource, _ actor: IoActor) -> Bool {
        source.valueType == actor.valueType && (source.useRawIoValues ?? false) == (actor.useRawIoValues ?? false)
    }

    /// The larger of two update rates when both are given, else the given one (Coaty JS's
    /// cumulated update rate: a rate that satisfies both sides).
    static func cumulatedUpdateRate(_ first: Double?, _ second: Double?) -> Double? {
        guard let first else { return second }
        guard let second else { return first }
        return max(first, second)
    }
}
