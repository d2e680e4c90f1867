public import CoatyModel

/// Matches JSON objects against Coaty filters with the exact semantics of Coaty JS's `ObjectMatcher`,
/// and orders, pages and joins result sets as Coaty JS's in-memory database does.
///
/// ```swift
/// let filter = ObjectFilter.where("name", .like("Light%")).and("value", .between(1, 5))
/// ObjectMatcher.matches(object, filter: filter)          // one object
/// ObjectMatcher.apply(filter.orderBy("name").take(10), to: objects)   // a result set
/// ```
///
/// Semantics:
/// - No object never matches; no filter, no conditions or `{}` match every object.
/// - A property path is split on dots (or given as an array); it yields *undefined* when a step
///   is missing or an intermediate value is not an object or array. Arrays take numeric steps
///   (`"tags.0"`) and `length`. `[]` is the object itself; `""` is the key `""`.
/// - ``ObjectFilterOperator/notExists`` is true exactly when the value is undefined; every other
///   operator is false on an undefined value (NotEquals, NotContains and NotIn too).
/// - Less/Greater/Between compare two strings by ``CoatyCollation``; anything else as JavaScript's
///   `<` does (numbers numerically, a numeric string against a number as a number, `null` as 0,
///   booleans as 0 and 1, arrays as their comma-joined text; a NaN makes the comparison false).
///   Between and NotBetween are inclusive and swap reversed bounds. Two integers compare exactly
///   (Coaty JS, whose numbers are doubles, cannot tell integers beyond 2^53 apart).
/// - Like matches strings only (see ``ObjectFilterExpression/like(_:)``).
/// - Equals, Contains and In use deep equality and containment (see ``equals(_:_:)``,
///   ``contains(_:_:)``, ``includes(_:_:)``).
/// - Where Coaty JS throws a TypeError — In or NotIn with an operand that is not an array,
///   Contains or NotContains asking whether an object contains `null` — the whole filter does not
///   match, unless an OR has already matched an earlier condition (JavaScript's evaluation order
///   is kept).
public enum ObjectMatcher {
    /// Whether `object` satisfies the conditions of `filter` (ordering and paging do not apply).
    /// - Parameters:
    ///   - object: the object; `nil` never matches.
    ///   - filter: the filter; `nil` matches every object.
    /// - Returns: `true` on a match.
    public static func matches(_ object: JSONValue?, filter: ObjectFilter?) -> Bool {
        matches(object, conditions: filter?.conditions)
    }

    /// Whether a Call's context satisfies a context filter.
    ///
    /// This is the bare matching rule; whether a Call with a filter and no context is handled is
    /// the Call event's rule (see the protocol).
    /// - Parameters:
    ///   - value: the context object; `nil` never matches.
    ///   - contextFilter: the filter; `nil` matches every context.
    /// - Returns: `true` on a match.
    public static func matches(_ value: JSONValue?, contextFilter: ContextFilter?) -> Bool {
        matches(value, conditions: contextFilter?.conditions)
    }

    /// Whether an observer with the given context handles a Call event carrying `filter`, by
    /// Coaty's rule: with both a filter and a context the context must match the filter; with a
    /// context but no filter the Call is not handled; without a context it is handled.
    ///
    /// ```swift
    /// let context: JSONValue = ["building": 33, "floor": 7]
    /// ObjectMatcher.handlesCall(filter: call.filter, context: context)
    /// ```
    /// - Parameters:
    ///   - filter: the Call event's context filter, if it has one.
    ///   - context: the observer's context object, if it has one.
    /// - Returns: `true` when the observer handles the Call.
    public static func handlesCall(filter: ContextFilter?, context: JSONValue?) -> Bool {
        switch (filter, context) {
        case (let filter?, let context?): matches(context, contextFilter: filter)
        case (nil, _?): false
        case (_, nil): true
        }
    }

    /// Whether `object` satisfies `conditions`.
    /// - Parameters:
    ///   - object: the object; `nil` never matches.
    ///   - conditions: the conditions; `nil` matches every object.
    /// - Returns: `true` on a match.
    public static func matches(_ object: JSONValue?, conditions: ObjectFilterConditions?) -> Bool {
        guard let object else { return false }
        guard let conditions else { return true }
        return CompiledConditions(conditions).matches(object)
    }

    /// Filters, orders, skips and takes `objects`, in that order.
    ///
    /// Ordering compares strings by ``CoatyCollation``, numbers numerically, `false` before `true`,
    /// and puts undefined values first when ascending; it is stable, and sorts as V8's
    /// `Array.prototype.sort` does, so even values of mixed types come out as in Coaty JS. A `take`
    /// of `nil` or 0 is unlimited. The filter is compiled once for all objects.
    /// - Parameters:
    ///   - filter: the filter; `nil` returns `objects` unchanged.
    ///   - objects: the candidates.
    /// - Returns: the selected objects.
    public static func apply(_ filter: ObjectFilter?, to objects: [JSONValue]) -> [JSONValue] {
        guard let filter else { return objects }
        return CompiledObjectFilter(filter).apply(to: objects)
    }

    /// Filters, orders, skips and takes items represented by JSON objects.
    /// - Parameters:
    ///   - filter: the filter; `nil` returns `items` unchanged.
    ///   - items: the candidates.
    ///   - json: the JSON object of an item, called once per item.
    /// - Returns: the selected items.
    public static func apply<Item>(
        _ filter: ObjectFilter?,
        to items: [Item],
        json: (Item) throws -> JSONValue
    ) rethrows -> [Item] {
        guard let filter else { return items }
        return try CompiledObjectFilter(filter).apply(to: items, json: json)
    }

    /// The value of a (nested) property, or `nil` when it is undefined.
    /// - Parameters:
    ///   - property: the property.
    ///   - object: the object.
    /// - Returns: the value, or `nil`.
    public static func value(of property: ObjectFilterProperty, in object: JSONValue) -> JSONValue? {
        PropertyPath(property).value(in: object)
    }

    /// Coaty's deep equality: primitives by value (strings by code units, `1 == 1.0`), arrays
    /// element by element in order, objects by key set and member values.
    /// - Parameters:
    ///   - a: a value.
    ///   - b: another value.
    /// - Returns: whether they are deep-equal.
    public static func equals(_ a: JSONValue, _ b: JSONValue) -> Bool {
        JavaScript.deepEquals(a, b)
    }

    /// Coaty's deep containment: a primitive contains only an equal primitive; an object contains
    /// an object whose every member it has with a containing value; an array contains an array
    /// whose every element is contained in one of its elements. On top level an array also
    /// contains a primitive element: `contains([1, 2, 3], 3)`. Where Coaty JS throws (an object
    /// asked whether it contains `null`) the answer is `false`.
    /// - Parameters:
    ///   - a: the containing value.
    ///   - b: the contained value.
    /// - Returns: whether `a` contains `b`.
    public static func contains(_ a: JSONValue, _ b: JSONValue) -> Bool {
        (try? JavaScript.deepContains(a, b)) ?? false
    }

    /// Whether `array` has an element deep-equal to `value`.
    /// - Parameters:
    ///   - array: the candidates.
    ///   - value: the value.
    /// - Returns: whether it is included.
    public static func includes(_ array: [JSONValue], _ value: JSONValue) -> Bool {
        array.contains { JavaScript.deepEquals($0, value) }
    }
}
