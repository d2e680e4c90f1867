import CoatyFilter
public import CoatyModel

extension CoatyTopic {
    /// The event level of a Coaty topic as a typed value: the event type with its filter, if any.
    ///
    /// Only the events that need a filter carry one, so a topic built from an `Event` always
    /// has the filter exactly when the protocol requires it.
    public enum Event: Sendable, Hashable {
        /// Advertise on `ADV:<CoreType>` or `ADV::<objectType>`.
        case advertise(TypeFilter)
        /// Deadvertise on `DAD`.
        case deadvertise
        /// Channel on `CHN:<channelId>`.
        case channel(id: String)
        /// Associate on `ASC:<ioContextName>`.
        case associate(ioContextName: String)
        /// IoValue on `IOV` (the source id is the IoSource's objectId).
        case ioValue
        /// Discover on `DSC`.
        case discover
        /// Resolve on `RSV`.
        case resolve
        /// Query on `QRY`.
        case query
        /// Retrieve on `RTV`.
        case retrieve
        /// Update on `UPD:<CoreType>` or `UPD::<objectType>`.
        case update(TypeFilter)
        /// Complete on `CPL`.
        case complete
        /// Call on `CLL:<operation>`.
        case call(operation: String)
        /// Return on `RTN`.
        case `return`

        /// The event type of this event level.
        public var eventType: CommunicationEventType {
            switch self {
            case .advertise: .advertise
            case .deadvertise: .deadvertise
            case .channel: .channel
            case .associate: .associate
            case .ioValue: .ioValue
            case .discover: .discover
            case .resolve: .resolve
            case .query: .query
            case .retrieve: .retrieve
            case .update: .update
            case .complete: .complete
            case .call: .call
            case .return: .return
            }
        }

        /// The filter as written after the first `:` of the event level (`Task`, `:com.x.Y`,
        /// a channel id, …), or `nil` for events without filter.
        public var filter: String? {
            switch self {
            case .advertise(let type), .update(let type):
                switch type {
                case .coreType(let coreType): coreType.rawValue
                case .objectType(let objectType): ":" + objectType
                }
            case .channel(let id): id
            case .associate(let name): name
            case .call(let operation): operation
            default: nil
            }
        }

        /// The event level as it appears in a topic, e.g. `ADV::com.x.Y` or `DSC`.
        public var level: String {
            let code = eventType.topicCode ?? ""
            if let filter { return code + ":" + filter }
            return code
        }

        /// Checks the filter against the protocol rules.
        func validate() throws(CoatyTopicError) {
            switch self {
            case .advertise(let type), .update(let type):
                switch type {
                case .coreType:
                    break
                case .objectType(let objectType):
                    guard isValidTopicComponent(objectType) else {
                        throw .invalidFilter(eventType, excerpt(objectType))
                    }
                }
            case .channel(let value), .associate(let value), .call(let value):
                guard isValidTopicComponent(value) else { throw .invalidFilter(eventType, excerpt(value)) }
            default:
                break
            }
        }
    }

    /// The filter of an Advertise or Update topic: a core type or an object type.
    public enum TypeFilter: Sendable, Hashable {
        /// A core type such as ``CoreType/task``, published as `ADV:Task`.
        case coreType(CoreType)
        /// An object type such as `com.example.Light`, published as `ADV::com.example.Light`.
        case objectType(String)

        /// The filters an Advertise or Update of an object is published on.
        ///
        /// Always the object's core type; when the object type is not the core type's own object
        /// type (`coaty.<CoreType>`), also the object type, so that observers of either receive it.
        /// An Update gets a correlation id per publication, and the responses are merged.
        ///
        /// - Parameters:
        ///   - objectType: the object's `objectType`.
        ///   - coreType: the object's `coreType`.
        /// - Returns: `[.coreType(coreType)]` or `[.coreType(coreType), .objectType(objectType)]`.
        public static func publishing(objectType: String, coreType: CoreType) -> [TypeFilter] {
            objectType == coreType.objectType ? [.coreType(coreType)] : [.coreType(coreType), .objectType(objectType)]
        }

        /// The filter to subscribe to for observing objects of an object type.
        ///
        /// For the own object type of a core type (`coaty.Task`) that is the core type topic
        /// (`ADV:Task`), since such objects are published there only; the observer then keeps the
        /// objects whose `objectType` matches. Any other object type has its own topic.
        ///
        /// - Parameter objectType: the object type to observe.
        /// - Returns: `.coreType(_)` for a core type's own object type, otherwise `.objectType(objectType)`.
        public static func observing(objectType: String) -> TypeFilter {
            if let coreType = CoreType(objectType: objectType) { return .coreType(coreType) }
            return .objectType(objectType)
        }
    }

    // MARK: Publication topics

    /// Builds a publication topic after validating every part.
    ///
    /// ```swift
    /// let topic = try CoatyTopic(event: .channel(id: "alerts"), namespace: "-", sourceId: identityId)
    /// // topic.name == "coaty/3/-/CHN:alerts/<identityId>"
    /// ```
    ///
    /// - Parameters:
    ///   - event: the event level (event type and filter).
    ///   - namespace: the publisher's own namespace (publications never use another namespace).
    ///   - sourceId: the publisher's identity id (for IoValue, the IoSource's objectId), a lowercase
    ///     version 4 UUID string.
    ///   - correlationId: a fresh lowercase version 4 UUID per request publication; a response
    ///     repeats its request's. Required for two-way events, must be `nil` for one-way events.
    /// - Throws: ``CoatyTopicError`` naming the invalid part.
    public init(
        event: Event,
        namespace: String,
        sourceId: String,
        correlationId: String? = nil
    ) throws(CoatyTopicError) {
        guard isValidTopicComponent(namespace) else { throw .invalidNamespace(excerpt(namespace)) }
        try event.validate()
        guard isLowercaseUUIDv4(sourceId) else { throw .invalidSourceId(excerpt(sourceId)) }
        let type = event.eventType
        if type.isTwoWay {
            guard let correlationId else { throw .missingCorrelationId(type) }
            guard isLowercaseUUIDv4(correlationId) else { throw .invalidCorrelationId(excerpt(correlationId)) }
        } else if correlationId != nil {
            throw .unexpectedCorrelationId(type)
        }

        var name = "coaty/3/"
        let filter = event.filter
        name.reserveCapacity(
            8 + namespace.utf8.count + 5 + (filter?.utf8.count ?? 0) + 37 + (correlationId == nil ? 0 : 37)
        )
        name += namespace
        let namespaceEnd = name.utf8.count
        name += "/"
        name += type.topicCode ?? ""
        if let filter {
            name += ":"
            name += filter
        }
        name += "/"
        let sourceStart = name.utf8.count
        name += sourceId
        if let correlationId {
            name += "/"
            name += correlationId
        }
        let byteCount = name.utf8.count
        guard byteCount <= Self.maximumByteCount else { throw .tooLong(byteCount: byteCount) }
        self.name = name
        self.eventType = type
        self.namespaceEnd = Int32(namespaceEnd)
        self.sourceStart = Int32(sourceStart)
        (self.sourceUUID, self.correlation) = withUTF8Bytes(name) {
            Self.ids(in: $0, sourceStart: sourceStart, twoWay: type.isTwoWay)
        }
    }

    /// Builds a publication topic from typed ids; see ``init(event:namespace:sourceId:correlationId:)-(_,_,String,_)``.
    ///
    /// - Parameters:
    ///   - event: the event level (event type and filter).
    ///   - namespace: the publisher's own namespace.
    ///   - sourceId: the publisher's identity id (for IoValue, the IoSource's objectId); must be a
    ///     version 4 UUID.
    ///   - correlationId: required for two-way events (a version 4 UUID), `nil` for one-way events.
    /// - Throws: ``CoatyTopicError`` naming the invalid part.
    public init(
        event: Event,
        namespace: String,
        sourceId: CoatyUUID,
        correlationId: CoatyUUID? = nil
    ) throws(CoatyTopicError) {
        try self.init(
            event: event,
            namespace: namespace,
            sourceId: sourceId.uuidString,
            correlationId: correlationId?.uuidString
        )
    }

    // MARK: Subscription topic filters

    /// Builds the MQTT topic filter that receives the given event.
    ///
    /// - One-way events: `coaty/3/<ns>/<EVT[:filter]>/+`
    /// - Requests: `coaty/3/<ns>/<EVT[:filter]>/+/+`
    /// - Responses: `coaty/3/<ns>/<RSP>/+/<correlationId>` (`+` when `correlationId` is `nil`,
    ///   which receives every response of that type, e.g. for monitoring).
    ///
    /// `<ns>` is the namespace, or `+` when `crossNamespacing` is on.
    ///
    /// - Parameters:
    ///   - event: the event level to receive.
    ///   - namespace: the subscriber's own namespace; validated even with cross-namespacing.
    ///   - crossNamespacing: whether to receive the event from every namespace.
    ///   - correlationId: for responses only, the correlation id of the request awaiting them.
    /// - Returns: a valid MQTT topic filter.
    /// - Throws: ``CoatyTopicError`` for an invalid namespace, filter or correlation id, or
    ///   ``CoatyTopicError/unexpectedCorrelationId(_:)`` when a correlation id is given for an
    ///   event that is not a response.
    public static func subscriptionFilter(
        for event: Event,
        namespace: String,
        crossNamespacing: Bool = false,
        correlationId: String? = nil
    ) throws(CoatyTopicError) -> String {
        guard isValidTopicComponent(namespace) else { throw .invalidNamespace(excerpt(namespace)) }
        try event.validate()
        let type = event.eventType
        if let correlationId {
            guard type.isResponse else { throw .unexpectedCorrelationId(type) }
            guard isLowercaseUUIDv4(correlationId) else { throw .invalidCorrelationId(excerpt(correlationId)) }
        }
        var filter = "coaty/3/"
        filter += crossNamespacing ? "+" : namespace
        filter += "/"
        filter += event.level
        filter += "/+"
        if type.isTwoWay {
            filter += "/"
            filter += correlationId ?? "+"
        }
        let byteCount = filter.utf8.count
        guard byteCount <= maximumByteCount else { throw .tooLong(byteCount: byteCount) }
        return filter
    }

    /// Builds the MQTT topic filter that receives the responses to one request:
    /// `coaty/3/<ns>/<RSP>/+/<correlationId>`.
    ///
    /// - Parameters:
    ///   - event: the response event (``Event/resolve``, ``Event/retrieve``, ``Event/complete``,
    ///     ``Event/return``).
    ///   - namespace: the requester's own namespace.
    ///   - crossNamespacing: whether responses from every namespace are received.
    ///   - correlationId: the correlation id of the request.
    /// - Returns: a valid MQTT topic filter.
    /// - Throws: ``CoatyTopicError``, e.g. when `event` is not a response.
    public static func subscriptionFilter(
        for event: Event,
        namespace: String,
        crossNamespacing: Bool = false,
        correlationId: CoatyUUID
    ) throws(CoatyTopicError) -> String {
        try subscriptionFilter(
            for: event,
            namespace: namespace,
            crossNamespacing: crossNamespacing,
            correlationId: correlationId.uuidString
        )
    }

    // MARK: Raw topics

    /// Validates a topic for a Raw publication: a valid MQTT topic name (non-empty, at most
    /// 65535 bytes, no NUL, `+` or `#`) that does not start with `coaty/`.
    ///
    /// - Parameter topic: the topic to publish on.
    /// - Throws: ``CoatyTopicError/invalidMQTTTopic(_:)`` or ``CoatyTopicError/reservedCoatyPrefix``.
    public static func validateRawTopic(_ topic: String) throws(CoatyTopicError) {
        do {
            try MQTTTopicFilter.validateTopicName(topic)
        } catch {
            throw .invalidMQTTTopic(error)
        }
        guard !isCoatyTopic(topic) else { throw .reservedCoatyPrefix }
    }

    /// Validates a topic filter for a Raw subscription: any valid MQTT 3.1.1 topic filter.
    ///
    /// A filter such as `#` also matches Coaty event topics on the broker; those messages are
    /// never delivered to Raw observers (filter them out with ``isCoatyTopic(_:)``).
    ///
    /// - Parameter filter: the topic filter to subscribe.
    /// - Throws: ``CoatyTopicError/invalidMQTTTopic(_:)``.
    public static func validateRawSubscriptionFilter(_ filter: String) throws(CoatyTopicError) {
        do {
            try MQTTTopicFilter.validate(filter)
        } catch {
            throw .invalidMQTTTopic(error)
        }
    }
}
