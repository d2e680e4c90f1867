// Codable conformances of the filter types, in Coaty's exact wire form.

package import CoatyModel

extension ObjectFilterProperty: Codable {
    /// Decodes a property in dot notation (a string) or array notation (an array of strings).
    /// - Throws: `DecodingError` when the value is neither.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let dotted = try? container.decode(String.self) {
            self.init(dotted)
        } else if let path = try? container.decode([String].self) {
            self.init(path: path)
        } else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "A filter property must be a string in dot notation or an array of strings"
            )
        }
    }

    /// Encodes the property in the form it was created with.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch form {
        case .dotted(let s): try container.encode(s)
        case .array(let names): try container.encode(names)
        }
    }
}

extension ObjectFilterExpression: Codable {
    /// Decodes `[operator, operand1?, operand2?]` with an operator number from 0 to 14.
    /// - Throws: `DecodingError` for a non-array, an unknown operator, or more than two operands.
    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        if let count = container.count, !(1...3).contains(count) {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "A filter expression must be [operator, operand1?, operand2?], got \(count) elements"
            )
        }
        guard !container.isAtEnd else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "A filter expression needs an operator number (0…14)"
            )
        }
        let raw = try container.decode(Int.self)
        guard let op = ObjectFilterOperator(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "Unknown filter operator \(raw); valid operators are 0…14"
            )
        }
        var operand1: JSONValue?
        var operand2: JSONValue?
        if !container.isAtEnd { operand1 = try container.decode(JSONValue.self) }
        if !container.isAtEnd { operand2 = try container.decode(JSONValue.self) }
        if !container.isAtEnd {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "A filter expression has at most two operands"
            )
        }
        self.init(op, operand1, operand2)
    }

    /// Encodes `[operator, operand1?, operand2?]`; an absent first operand before a present second
    /// one is written as `null`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(self.operator.rawValue)
        if let operand2 {
            try container.encode(operand1 ?? .null)
            try container.encode(operand2)
        } else if let operand1 {
            try container.encode(operand1)
        }
    }
}

extension ObjectFilterCondition: Codable {
    /// Decodes `[property, [operator, operand1?, operand2?]]`.
    /// - Throws: `DecodingError` for any other shape.
    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        if let count = container.count, count != 2 {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "A filter condition must be [property, [operator, operands…]], got \(count) elements"
            )
        }
        let property = try container.decode(ObjectFilterProperty.self)
        let expression = try container.decode(ObjectFilterExpression.self)
        self.init(property, expression)
    }

    /// Encodes `[property, [operator, operand1?, operand2?]]`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(property)
        try container.encode(expression)
    }
}

extension ObjectFilterConditions: Codable {
    private enum CodingKeys: String, CodingKey {
        case and, or
    }

    /// Decodes a single condition (an array) or `{"and":[…]}` / `{"or":[…]}`; `{}` decodes as an
    /// empty AND, which matches every object, as in Coaty JS.
    /// - Throws: `DecodingError` for other shapes, or when both `and` and `or` are present.
    public init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: CodingKeys.self) {
            let hasAnd = keyed.contains(.and)
            let hasOr = keyed.contains(.or)
            if hasAnd && hasOr {
                throw DecodingError.dataCorruptedError(
                    forKey: .or,
                    in: keyed,
                    debugDescription: "Filter conditions must have either \"and\" or \"or\", not both"
                )
            }
            if hasOr {
                self = .or(try keyed.decode([ObjectFilterCondition].self, forKey: .or))
            } else if hasAnd {
                self = .and(try keyed.decode([ObjectFilterCondition].self, forKey: .and))
            } else {
                self = .and([])
            }
            return
        }
        self = .condition(try ObjectFilterCondition(from: decoder))
    }

    /// Encodes the single condition as an array, or `{"and":[…]}` / `{"or":[…]}`.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .condition(let condition):
            try condition.encode(to: encoder)
        case .and(let list):
            var keyed = encoder.container(keyedBy: CodingKeys.self)
            try keyed.encode(list, forKey: .and)
        case .or(let list):
            var keyed = encoder.container(keyedBy: CodingKeys.self)
            try keyed.encode(list, forKey: .or)
        }
    }
}

extension ObjectFilterOrdering: Codable {
    /// Decodes `[property, "Asc" | "Desc"]`.
    /// - Throws: `DecodingError` for any other shape or direction.
    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        if let count = container.count, count != 2 {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "An ordering must be [property, \"Asc\" | \"Desc\"]"
            )
        }
        let property = try container.decode(ObjectFilterProperty.self)
        let order = try container.decode(ObjectFilterSortOrder.self)
        self.init(property, order)
    }

    /// Encodes `[property, "Asc" | "Desc"]`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(property)
        try container.encode(order)
    }
}

extension ObjectFilter: Codable {
    private enum CodingKeys: String, CodingKey {
        case conditions, orderByProperties, skip, take
    }

    /// Decodes the wire form; absent fields stay `nil`.
    /// - Throws: `DecodingError` for malformed conditions, orderings, or non-integer skip/take.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        conditions = try container.decodeIfPresent(ObjectFilterConditions.self, forKey: .conditions)
        orderByProperties = try container.decodeIfPresent([ObjectFilterOrdering].self, forKey: .orderByProperties)
        skip = try container.decodeIfPresent(Int.self, forKey: .skip)
        take = try container.decodeIfPresent(Int.self, forKey: .take)
    }

    /// Encodes the wire form, leaving absent fields out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(conditions, forKey: .conditions)
        try container.encodeIfPresent(orderByProperties, forKey: .orderByProperties)
        try container.encodeIfPresent(skip, forKey: .skip)
        try container.encodeIfPresent(take, forKey: .take)
    }
}

extension ContextFilter: Codable {
    private enum CodingKeys: String, CodingKey {
        case conditions
    }

    /// Decodes `{"conditions"?: …}`.
    /// - Throws: `DecodingError` for malformed conditions.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        conditions = try container.decodeIfPresent(ObjectFilterConditions.self, forKey: .conditions)
    }

    /// Encodes `{"conditions": …}`, or `{}` without conditions.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(conditions, forKey: .conditions)
    }
}

extension ObjectFilter: CustomStringConvertible {
    /// The filter's wire JSON, e.g. `{"conditions":["name",[6,"Light%"]],"take":10}`.
    public var description: String {
        (try? JSONValueEncoder().encodeToString(self)) ?? "ObjectFilter(unencodable)"
    }
}

extension ContextFilter: CustomStringConvertible {
    /// The filter's wire JSON, e.g. `{"conditions":["floor",[4,6,8]]}`.
    public var description: String {
        (try? JSONValueEncoder().encodeToString(self)) ?? "ContextFilter(unencodable)"
    }
}

// MARK: - Reading a received filter without Decodable

extension ObjectFilter {
    /// The filter of a received payload member, read straight from its JSON for the shapes Coaty
    /// agents send (a Query's filter: ~5 × faster than through `Decodable`); `nil` for anything
    /// else — a `null` or unknown member, a number that is not an integer, a malformed condition —
    /// which `init(from:)` then reads, to the same filter or its error. `FilterReadingTests`
    /// hold the two readings equal.
    package init?(reading json: JSONValue) {
        guard case .object(let members) = json else { return nil }
        self.init()
        for (key, value) in members {
            switch (key, value) {
            case ("conditions", _):
                guard let conditions = ObjectFilterConditions(reading: value) else { return nil }
                self.conditions = conditions
            case ("orderByProperties", .array(let levels)):
                var orderings: [ObjectFilterOrdering] = []
                orderings.reserveCapacity(levels.count)
                for level in levels {
                    guard case .array(let pair) = level, pair.count == 2,
                        let property = ObjectFilterProperty(reading: pair[0]),
                        case .string(let direction) = pair[1], let order = ObjectFilterSortOrder(rawValue: direction)
                    else { return nil }
                    orderings.append(ObjectFilterOrdering(property, order))
                }
                orderByProperties = orderings
            case ("skip", .int(let number)):
                guard let exact = Int(exactly: number) else { return nil }
                skip = exact
            case ("take", .int(let number)):
                guard let exact = Int(exactly: number) else { return nil }
                take = exact
            default:
                return nil
            }
        }
    }
}

extension ObjectFilterConditions {
    /// See ``ObjectFilter/init(reading:)``.
    package init?(reading json: JSONValue) {
        switch json {
        case .array:
            guard let condition = ObjectFilterCondition(reading: json) else { return nil }
            self = .condition(condition)
        case .object(let members):
            guard members.count <= 1 else { return nil }
            guard let key = members.keys.first, let value = members.values.first else {
                self = .and([])
                return
            }
            guard key == "and" || key == "or", case .array(let elements) = value else { return nil }
            var conditions: [ObjectFilterCondition] = []
            conditions.reserveCapacity(elements.count)
            for element in elements {
                guard let condition = ObjectFilterCondition(reading: element) else { return nil }
                conditions.append(condition)
            }
            self = key == "and" ? .and(conditions) : .or(conditions)
        default:
            return nil
        }
    }
}

extension ObjectFilterCondition {
    /// `[property, [operator, operand1?, operand2?]]`; see ``ObjectFilter/init(reading:)``.
    package init?(reading json: JSONValue) {
        guard case .array(let pair) = json, pair.count == 2, let property = ObjectFilterProperty(reading: pair[0]),
            case .array(let expression) = pair[1], (1...3).contains(expression.count),
            case .int(let number) = expression[0], let raw = Int(exactly: number),
            let op = ObjectFilterOperator(rawValue: raw)
        else { return nil }
        // Absent operands are `Optional.none` (a bare `nil` would be JSON `null` here).
        let operand1: JSONValue? = expression.count > 1 ? .some(expression[1]) : .none
        let operand2: JSONValue? = expression.count > 2 ? .some(expression[2]) : .none
        self.init(property, ObjectFilterExpression(op, operand1, operand2))
    }
}

extension ObjectFilterProperty {
    /// A dotted string or an array of strings; see ``ObjectFilter/init(reading:)``.
    package init?(reading json: JSONValue) {
        switch json {
        case .string(let dotted):
            self.init(dotted)
        case .array(let elements):
            var path: [String] = []
            path.reserveCapacity(elements.count)
            for case .string(let name) in elements { path.append(name) }
            guard path.count == elements.count else { return nil }
            self.init(path: path)
        default:
            return nil
        }
    }
}
