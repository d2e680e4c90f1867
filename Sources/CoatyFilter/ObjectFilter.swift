public import CoatyModel

/// A filter operator of an ``ObjectFilterExpression``, encoded on the wire as an integer (0…14).
///
/// The semantics are those of Coaty JS's `ObjectMatcher`; see ``ObjectMatcher`` for the details
/// (undefined values, string collation, deep equality and containment).
public enum ObjectFilterOperator: Int, Sendable, Hashable, CaseIterable, Codable {
    /// The property is less than operand 1 (strings by collation, numbers numerically).
    case lessThan = 0
    /// The property is less than or equal to operand 1.
    case lessThanOrEqual = 1
    /// The property is greater than operand 1.
    case greaterThan = 2
    /// The property is greater than or equal to operand 1.
    case greaterThanOrEqual = 3
    /// The property lies between operand 1 and operand 2, inclusive; reversed bounds are swapped.
    case between = 4
    /// The property lies outside operand 1 … operand 2; reversed bounds are swapped.
    case notBetween = 5
    /// The property is a string matching the SQL LIKE pattern in operand 1 (`_`, `%`, `\` escapes).
    case like = 6
    /// The property is deep-equal to operand 1.
    case equals = 7
    /// The property exists and is not deep-equal to operand 1.
    case notEquals = 8
    /// The property exists (it may be `null`).
    case exists = 9
    /// The property does not exist.
    case notExists = 10
    /// The property (usually an object or array) deeply contains operand 1.
    case contains = 11
    /// The property exists and does not deeply contain operand 1.
    case notContains = 12
    /// The property is deep-equal to an element of the operand array.
    case `in` = 13
    /// The property exists and is deep-equal to no element of the operand array.
    case notIn = 14
}

/// The name of a (nested) object property in a filter condition or ordering.
///
/// Coaty accepts two wire forms, and this type keeps the one it was given so it encodes back
/// the same way:
/// - dot notation, a string split on dots: `"message.name"` (`""` is the key `""`);
/// - array notation, for keys that contain dots themselves: `["property.with.dots", "sub"]`
///   (`[]` is the object itself).
///
/// ```swift
/// let dotted: ObjectFilterProperty = "location.coords.latitude"
/// let array = ObjectFilterProperty(path: ["vendor.name", "id"])
/// ```
public struct ObjectFilterProperty: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The wire form of a property name.
    public enum Form: Sendable, Hashable {
        /// Dot notation: one string whose dots separate nested property names.
        case dotted(String)
        /// Array notation: one property name per nesting level.
        case array([String])
    }

    /// The form the property was written in; encoding reproduces it.
    public let form: Form

    /// The property names from the outermost to the innermost, split once at creation.
    public let path: [String]

    /// A property in dot notation.
    /// - Parameter dotted: property names separated by dots, e.g. `"message.name"`.
    public init(_ dotted: String) {
        form = .dotted(dotted)
        path = dotted.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    /// A property in array notation, for property names that contain dots.
    /// - Parameter path: the property names from the outermost to the innermost.
    public init(path: [String]) {
        form = .array(path)
        self.path = path
    }

    /// A property in dot notation from a string literal.
    public init(stringLiteral value: String) {
        self.init(value)
    }

    /// The property as Coaty JS would print it: the dotted string, or the array's names joined by dots.
    public var description: String {
        switch form {
        case .dotted(let s): s
        case .array(let names): "[" + names.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        }
    }

    /// Equal when the wire forms are equal (the same path in another form is a different value).
    public static func == (lhs: ObjectFilterProperty, rhs: ObjectFilterProperty) -> Bool {
        lhs.form == rhs.form
    }

    /// Hashes the wire form.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(form)
    }
}

/// A filter operator with its operands: the `[op, operand1?, operand2?]` part of a condition.
///
/// Build expressions with the static factories, which read well at the point of use:
///
/// ```swift
/// ObjectFilter.where("name", .like("Light%"))
/// ObjectFilter.where("value", .between(1, 5))
/// ObjectFilter.where("tags", .contains(["kitchen"]))
/// ObjectFilter.where("parentObjectId", .notExists)
/// ```
///
/// An absent operand (`nil`) is distinct from a JSON `null` operand, as in Coaty JS where a
/// missing operand is `undefined`.
public struct ObjectFilterExpression: Sendable, Hashable {
    /// The operator.
    public var `operator`: ObjectFilterOperator
    /// The first operand, if any.
    public var operand1: JSONValue?
    /// The second operand, if any (only Between and NotBetween use it).
    public var operand2: JSONValue?

    /// An expression from its parts; prefer the static factories such as ``equals(_:)``.
    /// - Parameters:
    ///   - operator: the filter operator.
    ///   - operand1: the first operand, or `nil` for none.
    ///   - operand2: the second operand, or `nil` for none.
    public init(_ operator: ObjectFilterOperator, _ operand1: JSONValue? = nil, _ operand2: JSONValue? = nil) {
        self.operator = `operator`
        self.operand1 = operand1
        self.operand2 = operand2
    }

    /// The property is less than `value` (strings by collation, numbers numerically).
    public static func lessThan(_ value: JSONValue) -> Self { Self(.lessThan, value) }
    /// The property is less than or equal to `value`.
    public static func lessThanOrEqual(_ value: JSONValue) -> Self { Self(.lessThanOrEqual, value) }
    /// The property is greater than `value`.
    public static func greaterThan(_ value: JSONValue) -> Self { Self(.greaterThan, value) }
    /// The property is greater than or equal to `value`.
    public static func greaterThanOrEqual(_ value: JSONValue) -> Self { Self(.greaterThanOrEqual, value) }
    /// The property is between `lower` and `upper`, inclusive; reversed bounds are swapped.
    public static func between(_ lower: JSONValue, _ upper: JSONValue) -> Self { Self(.between, lower, upper) }
    /// The property is outside `lower` … `upper`; reversed bounds are swapped.
    public static func notBetween(_ lower: JSONValue, _ upper: JSONValue) -> Self {
        Self(.notBetween, lower, upper)
    }
    /// The property is a string matching the SQL LIKE `pattern`: `_` is one character, `%` any
    /// sequence, a backslash escapes `_`, `%` and itself; the match is anchored and case-sensitive.
    public static func like(_ pattern: String) -> Self { Self(.like, .string(pattern)) }
    /// The property is deep-equal to `value`.
    public static func equals(_ value: JSONValue) -> Self { Self(.equals, value) }
    /// The property exists and is not deep-equal to `value`.
    public static func notEquals(_ value: JSONValue) -> Self { Self(.notEquals, value) }
    /// The property exists.
    public static var exists: Self { Self(.exists) }
    /// The property does not exist.
    public static var notExists: Self { Self(.notExists) }
    /// The property deeply contains `value` (object members, array elements, recursively).
    public static func contains(_ value: JSONValue) -> Self { Self(.contains, value) }
    /// The property exists and does not deeply contain `value`.
    public static func notContains(_ value: JSONValue) -> Self { Self(.notContains, value) }
    /// The property is deep-equal to one of `values`.
    public static func `in`(_ values: [JSONValue]) -> Self { Self(.in, .array(values)) }
    /// The property exists and is deep-equal to none of `values`.
    public static func notIn(_ values: [JSONValue]) -> Self { Self(.notIn, .array(values)) }
}

/// One filter condition: a property and the expression its value must satisfy.
///
/// Wire form: `[property, [operator, operand1?, operand2?]]`.
public struct ObjectFilterCondition: Sendable, Hashable {
    /// The property whose value is tested.
    public var property: ObjectFilterProperty
    /// The operator and operands applied to the property's value.
    public var expression: ObjectFilterExpression

    /// A condition on `property`.
    /// - Parameters:
    ///   - property: the property, in dot notation (a string literal) or array notation.
    ///   - expression: the test, e.g. `.equals(42)`.
    public init(_ property: ObjectFilterProperty, _ expression: ObjectFilterExpression) {
        self.property = property
        self.expression = expression
    }
}

/// The `conditions` of a filter: one condition, or several combined by AND or by OR.
///
/// Coaty does not nest combinations. An empty AND matches every object; an empty OR matches none.
public enum ObjectFilterConditions: Sendable, Hashable {
    /// A single condition, wire form `[P, [op, …]]`.
    case condition(ObjectFilterCondition)
    /// All conditions must hold, wire form `{"and":[…]}`.
    case and([ObjectFilterCondition])
    /// At least one condition must hold, wire form `{"or":[…]}`.
    case or([ObjectFilterCondition])
}

/// The sort direction of an ``ObjectFilterOrdering``, `"Asc"` or `"Desc"` on the wire.
public enum ObjectFilterSortOrder: String, Sendable, Hashable, CaseIterable, Codable {
    /// Ascending (`"Asc"`): undefined values first, then by value.
    case ascending = "Asc"
    /// Descending (`"Desc"`).
    case descending = "Desc"
}

/// One ordering criterion of an ``ObjectFilter``: wire form `[property, "Asc" | "Desc"]`.
public struct ObjectFilterOrdering: Sendable, Hashable {
    /// The property to order by.
    public var property: ObjectFilterProperty
    /// The direction.
    public var order: ObjectFilterSortOrder

    /// An ordering criterion.
    /// - Parameters:
    ///   - property: the property to order by.
    ///   - order: ascending (default) or descending.
    public init(_ property: ObjectFilterProperty, _ order: ObjectFilterSortOrder = .ascending) {
        self.property = property
        self.order = order
    }
}

/// A type that carries filter conditions and can be extended with further conditions by chaining.
///
/// ``ObjectFilter`` and ``ContextFilter`` conform, so both read the same:
///
/// ```swift
/// let filter = ObjectFilter.where("name", .like("Light%")).and("value", .between(1, 5))
/// let context = ContextFilter.where("floor", .equals(3)).or("floor", .equals(4))
/// ```
public protocol FilterConditionBuilding: Sendable {
    /// The conditions, if any; `nil` matches every object.
    var conditions: ObjectFilterConditions? { get set }
    /// A filter with no conditions.
    init()
}

extension FilterConditionBuilding {
    /// A filter with the single condition `property` `expression`.
    /// - Parameters:
    ///   - property: the property, e.g. `"name"` or `ObjectFilterProperty(path: ["a.b"])`.
    ///   - expression: the test, e.g. `.like("Light%")`.
    /// - Returns: the filter.
    public static func `where`(_ property: ObjectFilterProperty, _ expression: ObjectFilterExpression) -> Self {
        var filter = Self()
        filter.conditions = .condition(ObjectFilterCondition(property, expression))
        return filter
    }

    /// This filter with one more condition that must hold as well.
    ///
    /// Coaty cannot nest AND inside OR: calling `and` on a filter whose conditions are an OR of
    /// two or more conditions is a programming error and stops the program.
    /// - Parameters:
    ///   - property: the property.
    ///   - expression: the test.
    /// - Returns: the filter with the conditions combined by AND.
    public func and(_ property: ObjectFilterProperty, _ expression: ObjectFilterExpression) -> Self {
        var filter = self
        let condition = ObjectFilterCondition(property, expression)
        switch conditions {
        case nil: filter.conditions = .condition(condition)
        case .condition(let first): filter.conditions = .and([first, condition])
        case .and(let list): filter.conditions = .and(list + [condition])
        case .or(let list) where list.count <= 1: filter.conditions = .and(list + [condition])
        case .or: preconditionFailure("ObjectFilter: Coaty filters cannot mix AND and OR; use one combination")
        }
        return filter
    }

    /// This filter with one more alternative condition.
    ///
    /// Coaty cannot nest OR inside AND: calling `or` on a filter whose conditions are an AND of
    /// two or more conditions is a programming error and stops the program.
    /// - Parameters:
    ///   - property: the property.
    ///   - expression: the test.
    /// - Returns: the filter with the conditions combined by OR.
    public func or(_ property: ObjectFilterProperty, _ expression: ObjectFilterExpression) -> Self {
        var filter = self
        let condition = ObjectFilterCondition(property, expression)
        switch conditions {
        case nil: filter.conditions = .condition(condition)
        case .condition(let first): filter.conditions = .or([first, condition])
        case .or(let list): filter.conditions = .or(list + [condition])
        case .and(let list) where list.count <= 1: filter.conditions = .or(list + [condition])
        case .and: preconditionFailure("ObjectFilter: Coaty filters cannot mix AND and OR; use one combination")
        }
        return filter
    }

    /// A filter whose conditions must all hold (`{"and":[…]}`).
    /// - Parameter conditions: the conditions; none matches every object.
    /// - Returns: the filter.
    public static func allOf(_ conditions: [ObjectFilterCondition]) -> Self {
        var filter = Self()
        filter.conditions = .and(conditions)
        return filter
    }

    /// A filter of which at least one condition must hold (`{"or":[…]}`).
    /// - Parameter conditions: the conditions; none matches no object.
    /// - Returns: the filter.
    public static func anyOf(_ conditions: [ObjectFilterCondition]) -> Self {
        var filter = Self()
        filter.conditions = .or(conditions)
        return filter
    }
}

/// Criteria for filtering, ordering and paging Coaty objects, as sent in a Query event.
///
/// Wire form (absent fields are left out):
/// ```json
/// {"conditions": C | {"and":[C…]} | {"or":[C…]},
///  "orderByProperties": [[P, "Asc" | "Desc"], …], "skip": n, "take": n}
/// ```
///
/// Build one by chaining:
/// ```swift
/// let filter = ObjectFilter
///     .where("name", .like("Light%"))
///     .and("value", .between(1, 5))
///     .orderBy("name", .descending)
///     .skip(20)
///     .take(10)
/// let page = ObjectMatcher.apply(filter, to: objects)
/// ```
public struct ObjectFilter: FilterConditionBuilding, Hashable {
    /// The conditions; `nil` matches every object.
    public var conditions: ObjectFilterConditions?
    /// Ordering criteria, applied in turn; `nil` keeps the input order.
    public var orderByProperties: [ObjectFilterOrdering]?
    /// How many matching objects to skip after ordering; `nil` skips none.
    public var skip: Int?
    /// At most this many objects are returned; `nil` (or 0, as in Coaty JS) means unlimited.
    public var take: Int?

    /// A filter with no conditions, ordering or paging: it matches every object.
    public init() {}

    /// A filter from its parts.
    /// - Parameters:
    ///   - conditions: the conditions, or `nil` to match everything.
    ///   - orderByProperties: ordering criteria, or `nil`.
    ///   - skip: objects to skip after ordering, or `nil`.
    ///   - take: the maximum number of objects, or `nil` for unlimited.
    public init(
        conditions: ObjectFilterConditions?,
        orderByProperties: [ObjectFilterOrdering]? = nil,
        skip: Int? = nil,
        take: Int? = nil
    ) {
        self.conditions = conditions
        self.orderByProperties = orderByProperties
        self.skip = skip
        self.take = take
    }

    /// This filter with one more ordering criterion, applied after the existing ones.
    /// - Parameters:
    ///   - property: the property to order by.
    ///   - order: ascending (default) or descending.
    /// - Returns: the filter.
    public func orderBy(_ property: ObjectFilterProperty, _ order: ObjectFilterSortOrder = .ascending) -> Self {
        var filter = self
        filter.orderByProperties = (orderByProperties ?? []) + [ObjectFilterOrdering(property, order)]
        return filter
    }

    /// This filter skipping the first `count` matching objects after ordering.
    /// - Parameter count: the number of objects to skip.
    /// - Returns: the filter.
    public func skip(_ count: Int) -> Self {
        var filter = self
        filter.skip = count
        return filter
    }

    /// This filter returning at most `count` objects.
    /// - Parameter count: the maximum number of objects.
    /// - Returns: the filter.
    public func take(_ count: Int) -> Self {
        var filter = self
        filter.take = count
        return filter
    }

    /// The conditions of this filter as a ``ContextFilter`` (ordering and paging dropped).
    public var contextFilter: ContextFilter { ContextFilter(conditions: conditions) }
}

/// Criteria a Call event's context must satisfy: conditions only.
///
/// Wire form: `{"conditions": C | {"and":[C…]} | {"or":[C…]}}`.
///
/// ```swift
/// let filter = ContextFilter.where("floor", .between(6, 8)).and("building", .equals(33))
/// ObjectMatcher.matches(context, contextFilter: filter)
/// ```
public struct ContextFilter: FilterConditionBuilding, Hashable {
    /// The conditions; `nil` matches every context.
    public var conditions: ObjectFilterConditions?

    /// A filter with no conditions.
    public init() {}

    /// A filter with the given conditions.
    /// - Parameter conditions: the conditions, or `nil` to match everything.
    public init(conditions: ObjectFilterConditions?) {
        self.conditions = conditions
    }
}
